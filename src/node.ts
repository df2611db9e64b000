// The Node entry (also Deno and Bun, which resolve the `node` condition): the portable API plus local
// files: paths in open() and openModel(), and the functions that write to disk.
import { registerLocalFiles } from './local-files.ts'
import { nodeFiles } from './node-source.ts'

registerLocalFiles(nodeFiles)

export * from './index.ts'
export { fileSource } from './node-source.ts'
export { fileSink, writeFile, saveModel, type SaveModelOptions } from './node-writer.ts'
export { convertFile, convertModel, type ConvertFileOptions } from './convert-file.ts'
