// The contract's enums as their lowercase words, for tests that compare with or start from words.
import { enumOf, enumWord } from "../common/vocab.js";
import { RuntimeSchema, TaskStatusSchema, type Runtime, type TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";

export const statusWord = (s: TaskStatus): string => enumWord(TaskStatusSchema, s);
/** "vendorA_code" for Runtime.VENDORA_CODE. */
export const runtimeWord = (r: Runtime): string => enumWord(RuntimeSchema, r);
/** Runtime.VENDORA_CODE for "vendorA_code" ("" is unset). */
export const runtimeOf = (word: string): Runtime => enumOf<Runtime>(RuntimeSchema, word, "runtime");
