/** The socket of the daemon the extension's preferences name (shared by the AI tools). */
import { getPreferenceValues } from "@raycast/api";
import { socketPath } from "./paths";

export function daemonSocket(): string {
  const prefs = getPreferenceValues<{ notewellHome?: string }>();
  return socketPath({ notewellHome: (prefs.notewellHome ?? "").trim() });
}
