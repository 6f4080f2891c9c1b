// Public surface of cron dispatch.
export type { CronDispatchMode, CronFileError, CronFileResult, CronJob, CronKind, MissedPolicy } from "./cron-file.js";
export { CRON_JOB_FIELDS, cronFileError, formatCronFileError, parseCronFile, readCronFile } from "./cron-file.js";
export type { SlotOptions } from "./cron-schedule.js";
export { DEFAULT_TICK_MS, nextFire, nextSlot, parseInterval, validateSchedule } from "./cron-schedule.js";
export type { CronFire, CronFireStatus, CronStore, CronStoreOptions } from "./cron-store.js";
export { createFileCronStore, createMemoryCronStore } from "./cron-store.js";
export type {
  BashOptions,
  CronDispatch,
  CronDispatchContext,
  CronDispatchResult,
  JobDispatchDeps,
} from "./bash-dispatch.js";
export { createJobDispatch, runBash } from "./bash-dispatch.js";
export type { CronDispatcher, CronDispatcherDeps, CronJobView } from "./cron-dispatcher.js";
export { createCronDispatcher } from "./cron-dispatcher.js";
