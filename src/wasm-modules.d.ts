// The default entry inlines the wasm (via @rollup/plugin-wasm, sync): calling the import compiles it.
declare module '*.wasm' {
  const compile: () => WebAssembly.Module
  export default compile
}
// The workerd entry imports the .wasm file as a module, which that runtime compiles ahead of time.
declare module '*.wasm?module' {
  const module: WebAssembly.Module
  export default module
}
