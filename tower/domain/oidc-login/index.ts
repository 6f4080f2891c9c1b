// The console sign-in's face: the login flow, its relying party, the session check. The rest of
// the folder is its own; other folders import only this and types.ts (docs/architecture.md).
export { createOidcLogin, type OidcLogin } from "./oidc-login.js";
export { discoverRelyingParty } from "./relying-party.js";
export { createOidcSessionCheck } from "./session-check.js";
