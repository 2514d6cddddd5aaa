/** What both seccomp checks read: a profile type is RuntimeDefault or Localhost. */
import type { JsonObject } from '../json.js';
import { object, str } from './go-text.js';

export const validSeccomp = (type: unknown): boolean => type === 'RuntimeDefault' || type === 'Localhost';
export const seccompType = (ctx: JsonObject): string => str(object(ctx.seccompProfile).type);
