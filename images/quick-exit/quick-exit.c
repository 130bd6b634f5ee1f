/* The quick-exit program: exits 0 at once, whatever it is called as and whatever its arguments.
 * On virtual nodes the sidecar terminator swaps a sidecar's image for an image made of this program,
 * installed at the paths the sidecar's command uses, so the restarted sidecar ends successfully.
 * Built without libc (-nostdlib -static): the whole program is one exit system call. */
void _start(void) {
#if defined(__x86_64__)
  __asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
#elif defined(__aarch64__)
  __asm__ volatile("mov x8, #93\n\tmov x0, #0\n\tsvc #0");
#else
#error "quick-exit: add the exit system call for this architecture"
#endif
  for (;;) {
  }
}
