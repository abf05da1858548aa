/** A startup error shown as one line, without a stack trace. */
export class CliError extends Error {
  override name = 'CliError'
}
