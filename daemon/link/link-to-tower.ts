// The daemon's link to the tower and the attach gateway it dials back through (daemon.ts wires
// them): which link (EP_LINK), a fresh attach secret per daemon start (the tower refuses
// dial-backs proven with an older one).
import { randomBytes } from "node:crypto";
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { LinkResponse } from "../../gen/ep/tower/v1/fleet_pb.js";
import { createAttachGateway, type AttachGateway, type AttachGatewayOptions } from "../attach/index.js";
import type { TowerClients } from "./tower-client.js";
import { createTowerLink, type TowerLinkOptions } from "./tower-link.js";

/** EP_LINK: "session" (default) or "http1"; anything else is refused naming the variable. */
export function linkKind(v: string | undefined): "session" | "http1" {
  if (v === undefined || v === "" || v === "session" || v === "http1") return v === "http1" ? "http1" : "session";
  throw new Error(`EP_LINK must be session or http1, not ${JSON.stringify(v)}`);
}

export interface LinkToTowerOptions {
  backendUrl: string;
  token: string;
  version: string;
  backoff?: TowerLinkOptions["backoff"];
  /** tests: a link command dropped before it is handled */
  dropLinkMessage?(msg: LinkResponse): boolean;
  tower: TowerClients;
  clock: Clock;
  log: Logger;
  attach: Pick<AttachGatewayOptions, "hub" | "resolve" | "path">;
  agents: TowerLinkOptions["agents"];
  linkOverHttp1: boolean;
  onConnected(): void;
  onMessage(msg: LinkResponse, attach: AttachGateway): void;
}

/** The link (not started) and the attach gateway, sharing the start's attach secret. */
export function linkToTower(o: LinkToTowerOptions) {
  const attachSecret = randomBytes(32).toString("base64url");
  const attach = createAttachGateway({
    ...o.attach,
    log: o.log.child({ part: "attach" }),
    tower: { baseUrl: o.backendUrl, token: o.token, attachSecret },
  });
  const link = createTowerLink({
    nodes: o.tower.nodes,
    sessions: o.linkOverHttp1 ? undefined : o.tower.sessions,
    clock: o.clock,
    log: o.log.child({ part: "link" }),
    attachSecret,
    version: o.version,
    agents: o.agents,
    backoff: o.backoff,
    onConnected: o.onConnected,
    onState: (state) => o.log.info("link state", { state }),
    onMessage: (msg) => {
      if (!o.dropLinkMessage?.(msg)) o.onMessage(msg, attach);
    },
  });
  return { attach, link };
}
