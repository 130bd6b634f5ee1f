// Logs on stdout for both the agent and the controller: JSON, one object a line (the default), or
// text, one readable line an entry, for a terminal (--log-format).
import winston from 'winston';
import type { LogFormat } from './flags.ts';

export type Logger = winston.Logger;

export function createLogger(component: string, level = process.env.LOG_LEVEL ?? 'info', format: LogFormat = 'json'): Logger {
  return winston.createLogger({
    level,
    defaultMeta: { component },
    format: winston.format.combine(winston.format.timestamp(), winston.format.errors({ stack: false }), format === 'text' ? textLine : winston.format.json()),
    transports: [new winston.transports.Console()],
  });
}

/** `<time> <LEVEL> <message> key=value ...`: a value with spaces, quotes or `=` is quoted as JSON, an object written as JSON. */
const textLine = winston.format.printf(({ timestamp, level, message, ...fields }) => [
  String(timestamp),
  level.toUpperCase().padEnd(5),
  // One entry, one line: a message with a line break is quoted.
  typeof message === 'string' && !message.includes('\n') ? message : JSON.stringify(message),
  ...Object.entries(fields).map(([key, value]) => `${key}=${textValue(value)}`),
].join(' '));

function textValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}

/** The message of anything thrown, including Kubernetes API errors with a JSON body. */
export function errorMessage(err: unknown): string {
  if (err && typeof err === 'object') {
    const body = (err as { body?: unknown }).body;
    if (typeof body === 'string' && body.startsWith('{')) {
      try {
        const status = JSON.parse(body) as { message?: string };
        if (status.message) return status.message;
      } catch {
        // not JSON after all: fall through to the error's own message
      }
    }
    if (err instanceof Error) return err.message;
  }
  return String(err);
}

/** The HTTP status code of a Kubernetes API error, if it has one. */
export function statusCode(err: unknown): number | undefined {
  if (err && typeof err === 'object') {
    const code = (err as { code?: unknown; statusCode?: unknown }).code ?? (err as { statusCode?: unknown }).statusCode;
    if (typeof code === 'number') return code;
  }
  return undefined;
}
