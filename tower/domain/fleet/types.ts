// The node link's messages, as the fleet, replication and node questions name them.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type * as fleet from "../../../gen/ep/tower/v1/fleet_pb.js";

/** A command for a node's link, as built here or relayed from another replica (plain JSON: no task assignments). */
export type LinkCommand = MessageInitShape<typeof fleet.LinkResponseSchema>;
export type Send = (nodeId: string, msg: LinkCommand) => boolean;
