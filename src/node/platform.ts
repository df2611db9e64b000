// What the Node entries add to the portable code, once imported: local files (paths and file: URLs in open()
// and openModel()), and a persistent cache's folder on disk (createCache({ dir })).
import { registerFolderStorage } from '../cache/storage.ts'
import { registerLocalFiles } from '../sources/local-files.ts'
import { folderStorage } from './cache-folder.ts'
import { nodeFiles } from './file-source.ts'

registerLocalFiles(nodeFiles)
registerFolderStorage(folderStorage)
