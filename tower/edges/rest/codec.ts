// The seed's REST surface speaks snake_case JSON: the request is decoded into the
// same message the Connect route takes, so unknown fields and wrong types are
// refused the same way, naming the field.
import { fromJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { EpError } from "../../../common/errors.js";
import { enumsFromWords } from "../../../common/vocab.js";
import { restJson } from "../../../common/rest-json.js";

export function decodeRequest<D extends DescMessage>(
  schema: D,
  body: unknown,
  pathParams: Record<string, string> = {},
): MessageShape<D> {
  if (body !== undefined && body !== null && (typeof body !== "object" || Array.isArray(body))) {
    throw new EpError("invalid_argument", "the body must be a JSON object");
  }
  const json = { ...((body as Record<string, JsonValue>) ?? {}) };
  for (const [k, v] of Object.entries(pathParams)) {
    if (k in json && json[k] !== v)
      throw new EpError("invalid_argument", `${k}: the body disagrees with the path`, { field: k });
    json[k] = v;
  }
  // words of a closed set ("first_claim") to the enum's names; an unknown word is named here
  const named = enumsFromWords(schema, json) as JsonValue;
  try {
    return fromJson(schema, named, { ignoreUnknownFields: false });
  } catch (err) {
    const message = (err as Error).message;
    const unknown = /key "([^"]+)" is unknown/.exec(message);
    if (unknown)
      throw new EpError("unknown_field", `${unknown[1]}: no such field in this request`, { field: unknown[1] });
    const field =
      /field [\w.]*\.(\w+) from JSON/.exec(message)?.[1] ?? /decode field [\w.]*?\.?(\w+)/.exec(message)?.[1];
    throw new EpError(
      "invalid_argument",
      field ? `${field}: ${message.replace(/^cannot decode [^:]+: /, "wrong type or value: ")}` : message,
      field ? { field } : undefined,
    );
  }
}

export function encodeResponse<D extends DescMessage>(schema: D, msg: MessageShape<D>): JsonValue {
  const json = restJson(schema, msg) as Record<string, JsonValue>;
  // a list's next_page_token shows only when there is a next page: one-page lists read as before
  if (json.next_page_token === "") delete json.next_page_token;
  return json;
}
