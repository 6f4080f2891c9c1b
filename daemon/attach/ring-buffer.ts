// The last N bytes a terminal printed, addressed by absolute offsets (bytes since the session
// began), so a viewer that reconnects with the offset it reached gets exactly what it missed.
export interface RingBuffer {
  readonly capacity: number;
  /** Offset of the next byte to be written (= bytes written so far). */
  end(): number;
  /** Offset of the oldest byte still held. */
  start(): number;
  push(chunk: Buffer): void;
  /** Bytes from `from` to the end; `lost` when part of them has been overwritten already. */
  since(from: number): { data: Buffer; offset: number; lost: boolean };
}

export function createRingBuffer(capacity: number): RingBuffer {
  if (!Number.isInteger(capacity) || capacity <= 0) throw new RangeError("ring capacity must be a positive integer");
  const buf = Buffer.alloc(capacity);
  let written = 0;

  const start = () => Math.max(0, written - capacity);
  return {
    capacity,
    end: () => written,
    start,
    push(chunk) {
      let data = chunk;
      if (data.length >= capacity) {
        written += data.length - capacity;
        data = data.subarray(data.length - capacity);
      }
      const at = written % capacity;
      const first = Math.min(data.length, capacity - at);
      data.copy(buf, at, 0, first);
      if (first < data.length) data.copy(buf, 0, first);
      written += data.length;
    },
    since(from) {
      const lost = from < start();
      const offset = Math.min(Math.max(from, start()), written);
      const len = written - offset;
      if (len === 0) return { data: Buffer.alloc(0), offset, lost };
      const at = offset % capacity;
      const data =
        at + len <= capacity
          ? Buffer.from(buf.subarray(at, at + len))
          : Buffer.concat([buf.subarray(at), buf.subarray(0, len - (capacity - at))]);
      return { data, offset, lost };
    },
  };
}
