// A task's status as its lowercase word ("running"), for tests that compare with words.
import { enumWord } from "../common/vocab.js";
import { TaskStatusSchema, type TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";

export const statusWord = (s: TaskStatus): string => enumWord(TaskStatusSchema, s);
