// How protobuf-es writes strings into binary messages, for every process that imports this
// (the tower, epd): Node's own UTF-8 writer (Buffer.from, which slices small strings out of a
// shared pool) instead of TextEncoder.encode, which allocates a new ArrayBuffer per string. A Task
// has about fifteen strings; toBinary of one went from 46 to 32 µs on the bench machine, and every
// assignment on a link carries one or more (docs/perf-history.md, "Protobuf strings…"). The bytes are the
// same (common/protobuf-text.test.ts); decoding is left to the library's TextDecoder.
import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";

const library = getTextEncoding();

/** A string's UTF-8 bytes as TextEncoder writes them (a lone surrogate as U+FFFD). */
export const encodeUtf8 = (text: string): Uint8Array<ArrayBuffer> => Buffer.from(text, "utf8");

configureTextEncoding({ ...library, encodeUtf8 });
