// gRPC server reflection (v1 and v1alpha) from the generated descriptors: `buf curl`, `grpcurl`
// and other generic clients list the services and fetch the schema from the tower itself.
// The schema is public (it is the contract in proto/), so reflection needs no credential;
// calling a listed method does.
import { create, createRegistry, toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import * as v1 from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";

/** The reflection procedures, served without a credential (see isPublic). */
export const REFLECTION_PATHS = [
  "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
  "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

type Request = v1.ServerReflectionRequest | v1alpha.ServerReflectionRequest;
/** The answer as an init shape: create() makes it a v1 or a v1alpha message. */
type Answer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/**
 * Serves reflection for `services` (and for reflection itself) on the router. `detailFiles`: the
 * files of messages a client meets outside any method's signature (EP's error detail, packed in
 * an Any in google.rpc.Status.details), so a generic client can decode them by type URL.
 */
export function bindReflection(
  router: ConnectRouter,
  services: readonly DescService[],
  detailFiles: readonly DescFile[] = [],
): void {
  const served = [...services, v1.ServerReflection, v1alpha.ServerReflection];
  const files = new Map<string, DescFile>();
  const collect = (f: DescFile) => {
    if (files.has(f.proto.name)) return;
    files.set(f.proto.name, f);
    f.dependencies.forEach(collect);
  };
  served.forEach((s) => collect(s.file));
  detailFiles.forEach(collect);
  const registry = createRegistry(...files.values());
  const names = served.map((s) => s.typeName).sort();
  const encoded = new Map<DescFile, Uint8Array>();
  const bytesOf = (f: DescFile) => {
    let b = encoded.get(f);
    if (!b) encoded.set(f, (b = toBinary(FileDescriptorProtoSchema, f.proto)));
    return b;
  };

  /** The file and every file it imports, each once, the asked one first. */
  function withImports(file: DescFile): Answer {
    const files: Uint8Array[] = [];
    const seen = new Set<DescFile>();
    const visit = (f: DescFile) => {
      if (seen.has(f)) return;
      seen.add(f);
      files.push(bytesOf(f));
      f.dependencies.forEach(visit);
    };
    visit(file);
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: files } };
  }

  function notFound(what: string): Answer {
    return {
      case: "errorResponse",
      value: { errorCode: Code.NotFound, errorMessage: `${what} is not known to this server` },
    };
  }

  function fileOfSymbol(name: string): DescFile | undefined {
    const symbol = name.replace(/^\./, "");
    const found = registry.get(symbol);
    if (found) return found.file;
    // a method: <service>.<Method>
    const dot = symbol.lastIndexOf(".");
    const service = dot > 0 ? registry.getService(symbol.slice(0, dot)) : undefined;
    return service?.methods.some((m) => m.name === symbol.slice(dot + 1)) ? service.file : undefined;
  }

  function answer(req: Request): Answer {
    const m = req.messageRequest;
    switch (m.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: names.map((name) => ({ name })) } };
      case "fileByFilename": {
        const file = files.get(m.value);
        return file ? withImports(file) : notFound(`file ${m.value}`);
      }
      case "fileContainingSymbol": {
        const file = fileOfSymbol(m.value);
        return file ? withImports(file) : notFound(`symbol ${m.value}`);
      }
      case "fileContainingExtension":
        return notFound(`extension ${m.value.extensionNumber} of ${m.value.containingType}`);
      case "allExtensionNumbersOfType": {
        if (!registry.getMessage(m.value)) return notFound(`type ${m.value}`);
        return { case: "allExtensionNumbersResponse", value: { baseTypeName: m.value, extensionNumber: [] } };
      }
      default:
        return {
          case: "errorResponse",
          value: { errorCode: Code.InvalidArgument, errorMessage: "the request names no reflection question" },
        };
    }
  }

  // v1 and v1alpha have the same messages under two package names: one answer serves both
  router.service(v1.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const req of requests)
        yield create(v1.ServerReflectionResponseSchema, {
          validHost: req.host,
          originalRequest: req,
          messageResponse: answer(req),
        });
    },
  });
  router.service(v1alpha.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) {
        yield create(v1alpha.ServerReflectionResponseSchema, {
          validHost: req.host,
          originalRequest: req,
          messageResponse: answer(req),
        });
      }
    },
  });
}
