"""Names vulture cannot see being used: frameworks call them, or tests drive them as seams.

Read by vulture only (scripts/check), never imported. One line per name, with who uses it.
"""

# pydantic: model configuration, validators run by the model, wire fields parsed and kept
model_config  # pydantic.BaseModel / BaseSettings
_agent_or_command  # api.models: @model_validator
_one_of  # api.models: @model_validator
_folder  # config: @field_validator
_resume_has_id  # manifest: @field_validator
_rule_state  # manifest: @field_validator
_screen_state  # fixtures: @field_validator
_known_host  # api.models: @field_validator
_pem  # config: @field_validator
_subject  # config: @field_validator
_chain  # config: @field_validator
_kinds  # config: @field_validator
_tls_pair  # config: @model_validator
expirationTime  # api.routes_push: the browser's PushSubscription field, parsed and not kept
_consistent  # resume.ResumeSpec: @model_validator
optional_value  # resume.ResumeSpec: a manifest field, read by kind (getattr) in kind_of
variadic  # resume.ResumeSpec: a manifest field, read by kind (getattr) in kind_of
settings_customise_sources  # config: pydantic-settings hook
dotenv_settings  # config: keyword argument pydantic-settings passes to the hook
file_secret_settings  # config: keyword argument pydantic-settings passes to the hook
agent_capabilities  # acp.protocol: InitializeResponse field (the agent's answer, kept whole)
auth_methods  # acp.protocol: InitializeResponse field
locations  # acp.protocol: ToolCall field

# FastAPI: route functions, registered by decorator
ws_conversation  # api.routes_acp
healthz  # api.routes_service
metrics_text  # api.routes_service
logout  # api.routes_service
ledger_page  # api.routes_ledger
ledger_export  # api.routes_ledger
service_worker  # api.routes_service
web_manifest  # api.routes_service
new_pairing  # api.routes_devices
list_devices  # api.routes_devices
revoke_device  # api.routes_devices
pair_form  # api.routes_devices
push_key  # api.routes_push
subscriptions  # api.routes_push
test_push  # api.routes_push
escalated  # notify.Notification: why a sink got an escalated push (webhook JSON, PANEWATCH_ESCALATED)
acted_at  # push.Receipt: when the user acted on a push (kept beside shown_at for the ledger)
static  # api.routes_service
create_session  # api.routes_sessions
list_sessions  # api.routes_sessions
get_session  # api.routes_sessions
delete_session  # api.routes_sessions
resume_session  # api.routes_sessions
get_screen  # api.routes_sessions
ws_state  # api.routes_ws
ws_screen  # api.routes_ws

# test seams and counters read by tests (part of the tested surface)
ManualClock  # clock: the deterministic clock tests inject
tick  # clock.ManualClock.tick
resyncs  # events.EventStream: how often a slow consumer was resynced
notified  # oob: when the out-of-band watcher last reported
options_table  # config: the README's options table is checked against it
MemoryHost  # hosts.memory: the in-memory host the engine tests run on
input  # hosts.memory: what the in-memory agent was sent (tests read it)
engines  # manifest: which regex engine each rule runs on (tests read it)
survives_restart  # hosts: a host's capability (tests read it)

# pyte: its Stream dispatches escape sequences to Screen methods by name (screen.Screen.csi too)
reverse_index
write_process_input  # pyte.Screen calls it to answer a terminal query
report_device_attributes
erase_characters
alignment_display
repeat_last
scroll_up
scroll_down
insert_lines
delete_lines
insert_characters
delete_characters
cursor_to_line

# pydantic validators in manifest (decorated, run by the model)
_known_region
_valid_regexes
_has_patterns
_unique_rule_names
_one_way
_valid

# fields written into foreign objects: re2.Options, and C structs libghostty reads (screen_ghostty)
log_errors
max_mem
conformance_level
num_features
device_type
firmware_version
rom_cartridge
unit_id
cell_height
cell_width
trim
unwrap
selection

# the tmux host and the session registry: read by the hosts benchmark, driven by tests, set on sqlite3
pauses  # hosts.tmux: TmuxHost counter benchmarks/hosts.py prints
kill_server  # hosts.tmux: tests end the private tmux server (an agent host that outlives Panewatch)
set_state  # registry: the registry's state column, driven by tests/test_registry.py
row_factory  # registry: sqlite3.Connection attribute

# logging module switches, read by logging.LogRecord (logs.setup_logging turns them off)
logThreads  # logging
logProcesses  # logging
logMultiprocessing  # logging
_srcfile  # logging

# wrappers: the seam resume and containment put another agent argv behind (used by both)
with_agent  # wrappers.Launch

# read models (engine.models, the API's answers): fields pydantic serializes for clients
accepted  # api.routes_report: Accepted / Ignored
session_state  # api.routes_report.Accepted
logged_out  # api.routes_service.LoggedOut
age_s  # engine.models: ReportView, StatusView
counts  # engine.models.StatusView
bytes_emulated  # engine.models.EngineStats (also /metrics)
bytes_read_by_session  # engine.models.EngineStats (the benchmark's probe)
screen_errors  # engine.models.EngineStats
notifications_suppressed  # engine.models.EngineStats
foreground_pid  # engine.models.SessionInfo
launched_agent  # engine.models.SessionInfo
possible  # engine.models.ResumeOffer
full  # engine.models.ScreenFrame
manifest_version  # engine.models.Explanation
screen_verdict  # engine.models.Explanation
state_before  # engine.models.Sent
waited_s  # engine.models.AnswerResult
priority  # engine.models.PlanItem
stdout_noise  # engine.models.ConversationView
device  # engine.models.ActorKind: registered devices (Web Push), the next issue's writers
policy  # engine.models.ActorKind: automatic rules (the lab and benchmark act as one today)
discarded  # engine.models.Deletion: a worktree session's lost files
files_total  # worktrees.Changes

# the approval policy: pydantic validators and a FastAPI route, called by their frameworks
_valid_option  # manifest.RequestRead: approve_once / refuse patterns checked
_absolute  # policy.PolicyRule: folder
_unique_ids  # policy.PolicyFile
policy_status  # api.routes_policy: GET /api/policy
decisions  # api.routes_policy.PolicyStatus

# people and roles: FastAPI routes, called by the framework
list_users  # api.routes_users: GET /api/users
add_user  # api.routes_users: POST /api/users
remove_user  # api.routes_users: DELETE /api/users/{name}
session_users  # api.routes_users: GET /api/sessions/{sid}/users
restrict_session  # api.routes_users: PUT /api/sessions/{sid}/users
restricted  # api.routes_users.UserList: a wire field the page reads (people.js)
