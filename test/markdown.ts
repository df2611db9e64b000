// The project's Markdown (README.md and the guides in docs/) as the documentation tests see it: its fenced
// code blocks with what marks them, its relative links, and the anchors its headings make. Only the
// CommonMark that these files use: ``` fences, [text](target) links, # headings.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from './packed.ts'

/** README.md and every docs/*.md, as paths relative to the repository. */
export function markdownFiles(): string[] {
  return [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ]
}

export interface CodeBlock {
  file: string
  /** 1-based line of the opening fence. */
  line: number
  /** The fence's language: 'js', 'ts', 'sh', 'text', ... */
  lang: string
  /**
   * Where a JS or TS block runs, the info string's second word (```js page): 'node' (the default), 'page' or
   * 'worker'; its types are checked against that runtime's.
   */
  runtime: string
  code: string
  /** The reason given by `<!-- not run: reason -->` on the line before the fence, if any. */
  notRun?: string
  /** The text of a ```text block that follows this one with only blank lines between: its expected stdout. */
  output?: string
}

const FENCE = /^ *```(\S*)(?: +(\S+))?\s*$/
const NOT_RUN = /^<!-- not run: (.*\S) -->$/

export function codeBlocks(file: string): CodeBlock[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n')
  const blocks: CodeBlock[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i])
    if (!open) continue
    const start = i
    while (++i < lines.length && lines[i].trim() !== '```');
    if (i === lines.length) throw new Error(`${file}:${start + 1}: a code block is never closed`)
    const before = start > 0 ? NOT_RUN.exec(lines[start - 1].trim()) : null
    const code = dedent(lines.slice(start + 1, i), lines[start].indexOf('`'))
    blocks.push({ file, line: start + 1, lang: open[1], runtime: open[2] ?? 'node', code, notRun: before?.[1] })
  }
  for (let b = 1; b < blocks.length; b++) {
    const [previous, block] = [blocks[b - 1], blocks[b]]
    const between = lines.slice(previous.line + previous.code.split('\n').length, block.line - 1)
    if (block.lang === 'text' && between.every((l) => l.trim() === '')) previous.output = block.code
  }
  return blocks
}

/** A fence inside a list item is indented; so are its lines. */
function dedent(lines: string[], indent: number): string {
  return `${lines.map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length))).join('\n')}\n`
}

export interface Link {
  file: string
  line: number
  target: string
}

/** Links whose target is neither a URL with a scheme nor a mail address, outside code blocks and code spans. */
export function relativeLinks(file: string): Link[] {
  const links: Link[] = []
  let inFence = false
  readFileSync(join(ROOT, file), 'utf8')
    .split('\n')
    .forEach((text, i) => {
      if (FENCE.test(text)) inFence = !inFence
      if (inFence) return
      for (const m of text.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!/^[a-z][a-z0-9+.-]*:/i.test(m[1])) links.push({ file, line: i + 1, target: m[1] })
      }
    })
  return links
}

/** The anchors of a file's headings, as GitHub and npm make them (lowercase, punctuation dropped, spaces to '-'). */
export function headingAnchors(file: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  let inFence = false
  for (const text of readFileSync(join(ROOT, file), 'utf8').split('\n')) {
    if (FENCE.test(text)) inFence = !inFence
    const heading = inFence ? null : /^#{1,6} (.*)$/.exec(text)
    if (!heading) continue
    const slug = heading[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-')
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    anchors.add(n === 0 ? slug : `${slug}-${n}`)
  }
  return anchors
}
