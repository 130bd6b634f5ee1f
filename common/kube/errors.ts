// The API server's answers that callers expect and handle, by name rather than by status code.
import { statusCode } from '../log.ts';

/** 404: the object (or its namespace, or the resource) is not there. */
export function isNotFound(err: unknown): boolean {
  return statusCode(err) === 404;
}

/**
 * 409: on a write carrying a resourceVersion, someone wrote first (retry from fresh state); on a
 * create, an object of that name exists already.
 */
export function isConflict(err: unknown): boolean {
  return statusCode(err) === 409;
}

/** For `.catch`: a 404 becomes undefined (nothing there), anything else is thrown again. */
export function ignoreNotFound(err: unknown): undefined {
  if (isNotFound(err)) return undefined;
  throw err;
}

/** For `.catch` after a create: a 409 becomes undefined (the name is taken), anything else is thrown again. */
function ignoreAlreadyExists(err: unknown): undefined {
  if (isConflict(err)) return undefined;
  throw err;
}

/**
 * Creates the object: the object as the API server stored it, or undefined when one of that name
 * exists already; other errors are thrown.
 */
export function createIfAbsent<T>(client: { create<R>(path: string, body: unknown): Promise<R> }, path: string, body: T): Promise<T | undefined> {
  return client.create<T>(path, body).catch(ignoreAlreadyExists);
}
