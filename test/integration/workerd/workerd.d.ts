// The npm package `workerd` ships no types: its default export is the path of the workerd binary.
declare module 'workerd' {
  const binaryPath: string
  export default binaryPath
  export const compatibilityDate: string
  export const version: string
}
