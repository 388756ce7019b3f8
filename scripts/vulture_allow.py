"""Names vulture cannot see being used: frameworks call them, or tests drive them as seams.

Read by vulture only (scripts/check), never imported. One line per name, with who uses it.
"""

# pydantic: model configuration, validators run by the model, wire fields parsed and kept
model_config  # pydantic.BaseModel / BaseSettings
_agent_or_command  # api.models: @model_validator
_one_of  # api.models: @model_validator
_folder  # config: @field_validator
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
static  # api.routes_service
create_session  # api.routes_sessions
list_sessions  # api.routes_sessions
get_session  # api.routes_sessions
delete_session  # api.routes_sessions
get_screen  # api.routes_sessions
ws_state  # api.routes_ws
ws_screen  # api.routes_ws

# test seams and counters read by tests (part of the tested surface)
ManualClock  # clock: the deterministic clock tests inject
tick  # clock.ManualClock.tick
resyncs  # events.EventStream: how often a slow consumer was resynced
notified  # oob: when the out-of-band watcher last reported
options_table  # config: the README's options table is checked against it
