/**
 * The Node entry (also Deno and Bun, which resolve the `node` condition): the portable API plus local
 * files: paths in open() and openModel(), and the functions that write to disk.
 * @packageDocumentation
 */
import { registerLocalFiles } from './local-files.ts'
import { nodeFiles } from './node-source.ts'

registerLocalFiles(nodeFiles)

export { type ConvertFileOptions, convertFile, convertModel } from './convert-file.ts'
export { type GgufWritten, writeGguf } from './gguf/node.ts'
export * from './index.ts'
export { fileSource } from './node-source.ts'
export { fileSink, type SaveModelOptions, saveModel, writeFile } from './node-writer.ts'
