// npm run bench: every benchmark, each reporting ratios against a baseline measured in the same run.
import { existsSync } from 'node:fs'

const suites = ['header', 'convert'].filter((name) => existsSync(new URL(`./${name}.js`, import.meta.url)))
for (const name of suites) await (await import(`./${name}.js`)).run()
