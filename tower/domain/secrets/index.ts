// The secrets folder's face: the SecretService and the keyring that seals values at rest. The rest
// of the folder is its own; other folders import only this (docs/architecture.md).
export { decryptSecret, encryptSecret, type SecretKeyring } from "./crypto.js";
export { createSecretService, envKeySource, type KeySource, type SecretServiceImpl } from "./secrets.js";
