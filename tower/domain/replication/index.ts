// The replication folder's face: several replicas on one PostgreSQL database. The rest of the
// folder is its own; other folders import only this and types.ts (docs/architecture.md).
export { replicatedStore, startReplication } from "./replication.js";
