// Compiles WebAssembly text to binary with wabt. Used by tests and benchmarks to build
// booster modules inline; scripts/build-booster.mjs uses the same options for the
// committed default module so a recompile is byte-identical.
import wabtInit from "wabt";

type Wabt = Awaited<ReturnType<typeof wabtInit>>;
let wabtPromise: Promise<Wabt> | undefined;

export async function compileWat(source: string, filename = "module.wat"): Promise<Uint8Array> {
  wabtPromise ??= wabtInit();
  const wabt = await wabtPromise;
  const mod = wabt.parseWat(filename, source);
  try {
    mod.resolveNames();
    mod.validate();
    return Uint8Array.from(mod.toBinary({ log: false, write_debug_names: false }).buffer);
  } finally {
    mod.destroy();
  }
}
