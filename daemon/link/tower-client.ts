// The daemon's side of the tower API: Connect clients carrying the node JWT, in binary protobuf
// over HTTP/1.1 (a reverse proxy in front of the tower, docs/deploy.md, passes it as it is). The
// session (the link both ways) is gRPC over HTTP/2; the HTTP/1.1 link stream goes through connect-node's transport;
// unary calls (outcomes, heartbeats, progress) through the lean one of unary-transport.ts, which halves epd's CPU per
// short task (docs/perf-history.md, "epd's unary calls").
import "../../common/protobuf-text.js"; // how binary messages write strings (before any is written)
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { AgentService, NodeService } from "../../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import { ApprovalService } from "../../gen/ep/tower/v1/approvals_pb.js";
import { createUnaryTransport } from "./unary-transport.js";

export interface TowerClients {
  baseUrl: string;
  token: string;
  transport: Transport;
  work: Client<typeof WorkService>;
  nodes: Client<typeof NodeService>;
  /**
   * NodeService over HTTP/2 in the gRPC protocol, for the session (the link both ways; a proxy passes it as gRPC,
   * docs/deploy.md)
   */
  sessions: Client<typeof NodeService>;
  agents: Client<typeof AgentService>;
  approvals: Client<typeof ApprovalService>;
}

export function createTowerClients(baseUrl: string, token: string): TowerClients {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const streams = createConnectTransport({
    baseUrl,
    httpVersion: "1.1",
    useBinaryFormat: true,
    interceptors: [bearer],
  });
  const transport = createUnaryTransport({ baseUrl, headers: { authorization: `Bearer ${token}` }, streams });
  return {
    baseUrl,
    token,
    transport,
    work: createClient(WorkService, transport),
    nodes: createClient(NodeService, transport),
    sessions: createClient(NodeService, createGrpcTransport({ baseUrl, interceptors: [bearer] })),
    agents: createClient(AgentService, transport),
    approvals: createClient(ApprovalService, transport),
  };
}
