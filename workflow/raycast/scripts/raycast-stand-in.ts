/**
 * The two @raycast/api calls the AI tools make, outside Raycast: the tools-probe bundle
 * is built with `--alias:@raycast/api=./scripts/raycast-stand-in.ts`. Preferences come
 * from the environment (NOTEWELL_HOME), as Raycast would pass the extension's.
 */
export function getPreferenceValues<T>(): T {
  return { notewellHome: process.env.NOTEWELL_HOME ?? "", notewellCommand: "" } as T;
}
