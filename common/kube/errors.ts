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

/** For `.catch` after a create: a 409 becomes false (the name is taken), anything else is thrown again. */
function ignoreAlreadyExists(err: unknown): false {
  if (isConflict(err)) return false;
  throw err;
}

/** Creates the object: true when created, false when one of that name exists already; other errors are thrown. */
export function createIfAbsent(client: { create(path: string, body: unknown): Promise<unknown> }, path: string, body: unknown): Promise<boolean> {
  return client.create(path, body).then(() => true, ignoreAlreadyExists);
}
