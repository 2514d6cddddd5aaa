/** Where a command writes (and reads), so that tests need no process. */

/** One output stream. */
export interface Output {
  write(text: string): unknown;
}

/** A command's output streams. */
export interface CommandIo {
  readonly stdout: Output;
  readonly stderr: Output;
}
