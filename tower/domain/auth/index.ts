// The auth folder's face: credentials (tokens, tickets, sessions, keys), the AuthService and the
// OIDC settings. The rest of the folder is its own; other folders import only this (docs/architecture.md).
export { type Auth, createAuth } from "./auth.js";
export { claimedRole, OIDC_CALLBACK_PATH, type OidcConfig, type OidcLoginConfig, PERSON_ROLES } from "./oidc.js";
export { hashSecret } from "./secret.js";
export { createAuthService } from "./service.js";
