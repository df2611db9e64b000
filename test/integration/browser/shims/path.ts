// node:path for the browser run: POSIX paths, which is what the URL-path "file system" of fs.ts uses.
export const sep = '/'

function normalizeParts(path: string): string {
  const absolute = path.startsWith('/')
  const out: string[] = []
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue
    if (part === '..') out.pop()
    else out.push(part)
  }
  return (absolute ? '/' : '') + out.join('/')
}

export function join(...parts: string[]): string {
  return normalizeParts(parts.filter((p) => p !== '').join('/')) || '.'
}

export function relative(from: string, to: string): string {
  const a = normalizeParts(from).split('/').filter(Boolean)
  const b = normalizeParts(to).split('/').filter(Boolean)
  let common = 0
  while (common < a.length && common < b.length && a[common] === b[common]) common++
  return [...a.slice(common).map(() => '..'), ...b.slice(common)].join('/')
}

export function basename(path: string): string {
  return normalizeParts(path).split('/').pop() ?? ''
}

export function dirname(path: string): string {
  const p = normalizeParts(path)
  const i = p.lastIndexOf('/')
  return i <= 0 ? (p.startsWith('/') ? '/' : '.') : p.slice(0, i)
}

export default { sep, join, relative, basename, dirname }
