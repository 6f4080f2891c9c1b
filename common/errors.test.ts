import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { EpError, toEpError } from "./errors.js";

describe("toEpError", () => {
  it("keeps what it stands for as the cause, with its stack", () => {
    const boom = new TypeError("cannot read properties of undefined");
    const ep = toEpError(boom);
    expect(ep.code).toBe("internal");
    expect(ep.cause).toBe(boom);
    expect((ep.cause as Error).stack).toContain("errors.test.ts");
    const connect = new ConnectError("down", Code.Unavailable);
    expect(toEpError(connect)).toMatchObject({ code: "unavailable", cause: connect });
  });

  it("passes an EpError through, and never puts the cause in what clients see", () => {
    const ep = new EpError("not_found", "no such task", { id: "tsk_1" }, { cause: new Error("row missing") });
    expect(toEpError(ep)).toBe(ep);
    const wire = ep.toConnectError();
    expect(wire.rawMessage).toBe("no such task");
    expect(JSON.stringify(wire.metadata.get("ep-error-details"))).not.toContain("row missing");
  });
});
