// ep ai chat: one message to an AI console session, or a prompt loop when no message is given.
import { createInterface } from "node:readline/promises";
import { AiService, SubmitTurnResponseSchema } from "../../gen/ep/tower/v1/ai_pb.js";
import type { Context } from "../context.js";
import { json, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";

function describeReply(res: Row): string {
  const reply = (res.reply ?? {}) as Row;
  const lines: string[] = [];
  if (reply.content) lines.push(String(reply.content));
  for (const call of (reply.tool_calls as Row[] | undefined) ?? []) {
    if (call.action_id) continue;
    lines.push(`· ${call.tool}${call.error ? ` failed: ${call.error}` : ""}`);
    if (call.result && Object.keys(call.result as object).length) lines.push(json(call.result).trimEnd());
  }
  if (reply.error) lines.push(`error: ${reply.error}`);
  for (const a of (res.actions as Row[] | undefined) ?? []) {
    lines.push(
      `pending action ${a.id}: ${a.summary || a.tool} — approve with 'ep ` +
        `approvals approve ${a.id}' or reject with 'ep approvals reject ${a.id}'`,
    );
  }
  return lines.join("\n") || "(no reply)";
}

export async function run(ctx: Context): Promise<number> {
  const ai = tower(ctx, AiService);
  let sessionId = ctx.str("session");
  const ensureSession = async () => {
    if (!sessionId) sessionId = (await ai.createSession({ title: "" })).session!.id;
    return sessionId;
  };
  const turn = async (content: string) =>
    protoJson(SubmitTurnResponseSchema, await ai.submitTurn({ sessionId: await ensureSession(), content }));
  if (ctx.args.length) {
    const res = await turn(ctx.args[0]);
    ctx.out(ctx.json ? json({ session_id: sessionId, ...res }) : describeReply(res));
    return 0;
  }
  const tty = Boolean(process.stdin.isTTY);
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: tty });
  if (tty) ctx.err("ep ai chat — type a request; an empty line or Ctrl-D quits");
  rl.setPrompt("> ");
  if (tty) rl.prompt();
  try {
    for await (const line of rl) {
      if (!line.trim()) {
        if (tty) break;
        continue;
      }
      const res = await turn(line);
      ctx.out(ctx.json ? JSON.stringify({ session_id: sessionId, ...res }) : describeReply(res));
      if (tty) rl.prompt();
    }
  } finally {
    rl.close();
  }
  if (!ctx.json && sessionId) ctx.err(`session ${sessionId}`);
  return 0;
}
