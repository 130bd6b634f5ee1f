// JSON logs on stdout, one object a line, for both the agent and the controller.
import winston from 'winston';

export type Logger = winston.Logger;

export function createLogger(component: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return winston.createLogger({
    level,
    defaultMeta: { component },
    format: winston.format.combine(winston.format.timestamp(), winston.format.errors({ stack: false }), winston.format.json()),
    transports: [new winston.transports.Console()],
  });
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
