// Page tokens for the list RPCs (AIP-158 style): `page_size` (0 = everything, as before pages
// existed; at most MAX_PAGE_SIZE otherwise), `page_token` from the previous response's
// `next_page_token`, which is empty on the last page. A token is opaque to clients: the id of
// the last item returned and its position, base64url-encoded. A list ordered the same way on
// every call resumes after that item; if it is gone, at the same position.
import { invalidField } from "../../common/errors.js";

export const MAX_PAGE_SIZE = 1000;

interface Cursor {
  id: string;
  at: number;
}

export function encodePageToken(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.id, c.at])).toString("base64url");
}

/** The cursor in a page token; "" is the first page. A token not made here is invalid_argument. */
export function decodePageToken(token: string): Cursor | undefined {
  if (!token) return undefined;
  try {
    const [id, at] = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown[];
    if (typeof id === "string" && Number.isSafeInteger(at) && (at as number) >= 0) return { id, at: at as number };
  } catch {
    // falls through to the error
  }
  throw invalidField(
    "page_token",
    "is not a token this server gave (pass next_page_token from the previous page as it came)",
  );
}

export function checkPageSize(size: number, field = "page_size"): number {
  if (size < 0) throw invalidField(field, "must not be negative");
  if (size > MAX_PAGE_SIZE) throw invalidField(field, `must be at most ${MAX_PAGE_SIZE}`);
  return size;
}

/** One page of an ordered list, and the token of the next (empty when this is the last). */
export function paginate<T>(
  items: readonly T[],
  idOf: (item: T) => string,
  req: { pageSize?: number; pageToken?: string },
): { page: T[]; nextPageToken: string } {
  const size = checkPageSize(req.pageSize ?? 0);
  const cursor = decodePageToken(req.pageToken ?? "");
  let start = 0;
  if (cursor) {
    const found = items.findIndex((x) => idOf(x) === cursor.id);
    start = found >= 0 ? found + 1 : Math.min(cursor.at, items.length);
  }
  if (size === 0) return { page: items.slice(start), nextPageToken: "" };
  const page = items.slice(start, start + size);
  const more = start + size < items.length;
  return {
    page,
    nextPageToken:
      more && page.length ? encodePageToken({ id: idOf(page[page.length - 1]), at: start + page.length }) : "",
  };
}
