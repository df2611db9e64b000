/**
 * The Node entry (also Deno and Bun, which resolve the `node` condition): the portable API plus local
 * files: paths in open() and openModel(), and the functions that write to disk.
 * @packageDocumentation
 */
import './node/platform.ts'

export * from './index.ts'
export { fileSink, writeFile } from './node/atomic-files.ts'
export { type ConvertFileOptions, convertFile, convertModel } from './node/convert-file.ts'
export { fileSource } from './node/file-source.ts'
export { type SaveModelOptions, saveModel } from './node/save-model.ts'
