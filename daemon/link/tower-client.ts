// The daemon's side of the tower API: Connect clients carrying the node JWT, in binary protobuf
// over connect-node's HTTP/1.1 transport (the link stream and every unary call). HTTP/1.1 because
// a reverse proxy in front of the tower (docs/deploy.md) passes it as it is; a hand-written lean
// transport measured ~1 ms of epd CPU less per call and was removed as nobody feels that
// (docs/PERFORMANCE.md, "Bound through the library").
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AgentService, NodeService } from "../../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../../gen/ep/tower/v1/work_pb.js";
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
  const transport = createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true, interceptors: [bearer] });
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
