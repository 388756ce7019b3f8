// Panewatch's opencode plugin: added per launch (OPENCODE_CONFIG_CONTENT names this file), it
// posts what the pane's state hangs on to the pane's report socket, one event at a time and in
// order, without ever holding opencode up: a post that fails or takes over 2 s is dropped.
// Events of subagent sessions (a session with a parent) are not sent: they say nothing about
// the pane's own prompt.
import http from "node:http"

const socket = process.env.PANEWATCH_REPORT_SOCKET
const session = process.env.PANEWATCH_SESSION

// What a tool call acts on (its command, file or URL), without its content or diff: flat, as
// ``tool_input`` (the one nested value the service keeps of a report).
const SUBJECT_KEYS = ["command", "filepath", "filePath", "path", "url", "description"]
const pick = (obj) =>
  Object.fromEntries(SUBJECT_KEYS.filter((k) => typeof obj?.[k] === "string").map((k) => [k, obj[k].slice(0, 2000)]))

function post(payload) {
  return new Promise((resolve) => {
    const body = JSON.stringify(payload)
    const req = http.request(
      {
        socketPath: socket,
        path: `/report?session=${encodeURIComponent(session)}`,
        method: "POST",
        headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) },
        timeout: 2000,
      },
      (res) => {
        res.resume()
        res.on("end", resolve)
      },
    )
    req.on("timeout", () => req.destroy())
    req.on("error", () => resolve())
    req.on("close", resolve)
    req.end(body)
  })
}

export const Panewatch = async () => {
  if (!socket || !session) return {}
  const children = new Set()
  let queue = Promise.resolve()
  const send = (sessionID, event, fields = {}) => {
    if (sessionID && children.has(sessionID)) return
    queue = queue.then(() => post({ opencode: event, sessionID, ...fields }))
  }
  return {
    "chat.message": async (input) => send(input.sessionID, "chat.message"),
    "tool.execute.before": async (input, output) =>
      send(input.sessionID, "tool.execute.before", { tool: input.tool, tool_input: pick(output?.args) }),
    "tool.execute.after": async (input) => send(input.sessionID, "tool.execute.after", { tool: input.tool }),
    event: async ({ event }) => {
      const p = event.properties ?? {}
      if ((event.type === "session.created" || event.type === "session.updated") && p.info?.parentID) {
        children.add(p.info.id)
      } else if (event.type === "permission.asked") {
        send(p.sessionID, event.type, {
          permission: p.permission,
          tool_input: { ...pick(p.metadata), patterns: (p.patterns ?? []).slice(0, 20) },
        })
      } else if (event.type === "permission.replied") {
        send(p.sessionID, event.type, { reply: p.reply })
      } else if (event.type === "session.idle" || event.type === "session.error") {
        send(p.sessionID, event.type)
      }
    },
  }
}
