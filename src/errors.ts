/** Every failure this library reports on purpose is a SafetensorsError with one of these codes. */
export type ErrorCode =
  | 'HeaderTooSmall'
  | 'HeaderTooLarge'
  | 'InvalidHeaderLength'
  | 'InvalidHeader'
  | 'InvalidHeaderDeserialization'
  | 'InvalidOffset'
  | 'ValidationOverflow'
  | 'MisalignedSlice'
  | 'TensorInvalidInfo'
  | 'MetadataIncompleteBuffer'
  | 'TensorNotFound'
  | 'SliceOutOfRange'
  | 'TooManySlices'
  | 'UnsupportedConversion'
  | 'Io'
  | 'Aborted'

export class SafetensorsError extends Error {
  readonly code: ErrorCode

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'SafetensorsError'
    this.code = code
  }
}
