// Mission documents (put_doc) and task artifacts (put_artifact): small named texts kept
// beside the work they belong to. Putting the same name again replaces the content and
// bumps the version; each put is a `matrix` event.
import { iso } from "../../../common/clock.js";
import { EpError, invalidField } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import type { ArtifactRow, DocRow } from "../../store/ai-store.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { commit } from "../event-hub.js";

const MAX_CONTENT = 1_000_000;
/** `doc_…` / `art_…`: the sortable id format of common/ids.ts under a prefix it does not list yet. */
const idWith = (prefix: "doc" | "art", now: number): string => `${prefix}_${newId("trn", now).slice(4)}`;

const NAME = /^[^\u0000-\u001f/\\]{1,200}$/;

export interface PutDocInput {
  mission_id: string;
  name: string;
  content: string;
  content_type?: string;
}

export interface PutArtifactInput {
  task_id: string;
  name: string;
  content: string;
  content_type?: string;
}

function checkName(name: string): string {
  const n = name.trim();
  if (!NAME.test(n)) throw invalidField("name", "must be 1-200 characters without slashes or control characters");
  return n;
}

function checkContent(content: string): string {
  if (typeof content !== "string") throw invalidField("content", "must be a string");
  if (content.length > MAX_CONTENT) throw invalidField("content", `is longer than ${MAX_CONTENT} characters`);
  return content;
}

/** The JSON a tool returns for a doc or an artifact (snake_case, like the REST API). */
export function docJson(d: DocRow | ArtifactRow): Record<string, unknown> {
  return {
    id: d.id,
    domain_id: d.domainId,
    mission_id: d.missionId,
    ...("taskId" in d ? { task_id: d.taskId } : {}),
    name: d.name,
    content_type: d.contentType,
    version: d.version,
    size: d.content.length,
    created_at: d.createdAt,
    updated_at: d.updatedAt,
  };
}

export type DocsService = ReturnType<typeof createDocsService>;

export function createDocsService(deps: Deps) {
  const { clock } = deps;
  return {
    async putDoc(caller: Caller, input: PutDocInput): Promise<DocRow> {
      const name = checkName(input.name);
      const content = checkContent(input.content);
      return commit(deps, async (tx, emit) => {
        const m = input.mission_id ? await tx.getMission(input.mission_id) : undefined;
        if (!m)
          throw new EpError("mission_not_found", `mission ${input.mission_id} does not exist`, { field: "mission_id" });
        authorize(caller, "operate", { domainId: m.domainId });
        const ts = iso(clock.now());
        const doc = await tx.putDoc({
          id: idWith("doc", clock.now()),
          domainId: m.domainId,
          missionId: m.id,
          name,
          content,
          contentType: input.content_type?.trim() || "text/markdown",
          version: 1,
          createdAt: ts,
          updatedAt: ts,
        });
        emit({
          type: "matrix",
          name: "doc.put",
          domainId: m.domainId,
          missionId: m.id,
          payload: { doc_id: doc.id, mission_id: m.id, name, version: doc.version, by: caller.subject },
        });
        return doc;
      });
    },

    async putArtifact(caller: Caller, input: PutArtifactInput): Promise<ArtifactRow> {
      const name = checkName(input.name);
      const content = checkContent(input.content);
      return commit(deps, async (tx, emit) => {
        const t = input.task_id ? await tx.getTask(input.task_id) : undefined;
        if (!t) throw new EpError("task_not_found", `task ${input.task_id} does not exist`, { field: "task_id" });
        authorize(caller, "work", { domainId: t.domainId });
        const ts = iso(clock.now());
        const artifact = await tx.putArtifact({
          id: idWith("art", clock.now()),
          domainId: t.domainId,
          missionId: t.missionId,
          taskId: t.id,
          name,
          content,
          contentType: input.content_type?.trim() || "text/plain",
          version: 1,
          createdAt: ts,
          updatedAt: ts,
        });
        emit({
          type: "matrix",
          name: "artifact.put",
          domainId: t.domainId,
          missionId: t.missionId,
          taskId: t.id,
          payload: { artifact_id: artifact.id, task_id: t.id, name, version: artifact.version, by: caller.subject },
        });
        return artifact;
      });
    },

    async listDocs(caller: Caller, missionId: string): Promise<DocRow[]> {
      const m = await deps.store.getMission(missionId);
      if (!m) throw new EpError("mission_not_found", `mission ${missionId} does not exist`);
      authorize(caller, "read", { domainId: m.domainId });
      return deps.store.listDocs(m.id);
    },
  };
}
