// The order the benchmark runs things in, so that no kind always goes first or always last.

/** The runs of the burst: ours and native alternate which goes first, repeat by repeat (ours first in the first). */
export function burstOrder(repeats: number): { kind: 'ours' | 'native'; repeat: number; order: number }[] {
  return Array.from({ length: repeats }, (_, i) => {
    const kinds = i % 2 === 0 ? ['ours', 'native'] as const : ['native', 'ours'] as const;
    return kinds.map((kind, order) => ({ kind, repeat: i + 1, order: order + 1 }));
  }).flat();
}

/** Two lists merged so each one's items are spread evenly over the result (in their own order). */
export function interleave<T>(a: readonly T[], b: readonly T[]): T[] {
  const at = (i: number, n: number) => (i + 0.5) / n;
  const out: T[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (j >= b.length || (i < a.length && at(i, a.length) <= at(j, b.length))) out.push(a[i++]!);
    else out.push(b[j++]!);
  }
  return out;
}
