// The daemon's side of the tower API: Connect clients carrying the node JWT; unary calls in binary
// protobuf on a lean node:http transport (unary-transport.ts), streams on connect-node's HTTP/1.1.
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AgentService, NodeService } from "../../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import { createUnaryTransport } from "./unary-transport.js";
import { ApprovalService } from "../../gen/ep/tower/v1/approvals_pb.js";

export interface TowerClients {
  baseUrl: string;
  token: string;
  transport: Transport;
  work: Client<typeof WorkService>;
  nodes: Client<typeof NodeService>;
  agents: Client<typeof AgentService>;
  approvals: Client<typeof ApprovalService>;
}

export function createTowerClients(baseUrl: string, token: string): TowerClients {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const streams = createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [bearer] });
  const transport = createUnaryTransport({ baseUrl, headers: { authorization: `Bearer ${token}` }, streams });
  return {
    baseUrl,
    token,
    transport,
    work: createClient(WorkService, transport),
    nodes: createClient(NodeService, transport),
    agents: createClient(AgentService, transport),
    approvals: createClient(ApprovalService, transport),
  };
}
