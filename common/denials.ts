// How much of what an agent was refused a task keeps (TaskResult.denials): epd sends no more,
// and the tower cuts at the same numbers, so a runaway agent cannot bloat a task's row.

/** Denials per result. */
export const DENIAL_LIMIT = 50;
/** Characters per text field of a denial (a clipped field ends with "…"). */
export const DENIAL_FIELD_LIMIT = 500;
