# shellcheck shell=bash
# Sourced by up.sh, down.sh, engine.sh and registry.sh: how a lease names the process holding it, and
# how the worlds sharing one of the machine's services (the engine, a registry port) find each other.

# "PID STARTTIME": the start time tells a live holder from a new process that reused its PID.
process_identity() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    echo "$1 $(awk '{ print $20 }' <<<"$stat")"
}

# A lease naming a process is live while that very process (same start time) runs; one naming
# no process (a manual `up`) is live until its `down`.
lease_is_live() {
    local recorded pid
    recorded=$(cat "$1" 2>/dev/null) || return 1
    [[ -z $recorded ]] && return 0
    pid=${recorded%% *}
    [[ $(process_identity "$pid" 2>/dev/null) == "$recorded" ]]
}

# Whether the world at state dir $1 still has a live lease.
world_is_leased() {
    local lease
    for lease in "$1"/leases/*; do
        [[ -f $lease ]] && lease_is_live "$lease" && return 0
    done
    return 1
}

# The machine's services (dockerd's default socket, a registry's port) outlive the world that started
# them, so every world using one registers in a machine-wide folder ($1). A world that started the
# service and ends while another registered world is still leased hands the service over to it.
world_user_entry() { echo "$1/$(printf '%s' "$STATE" | sha256sum | cut -c1-16)"; }

register_world() {
    mkdir -p "$1"
    printf '%s\n' "$STATE" >"$(world_user_entry "$1")"
}

unregister_world() { rm -f "$(world_user_entry "$1")"; }

# Another world registered in $1 that still holds a lease, printed; entries of worlds without one are dropped.
leased_other_world() {
    local entry other mine
    mine=$(world_user_entry "$1")
    for entry in "$1"/*; do
        [[ -f $entry && $entry != "$mine" ]] || continue
        other=$(cat "$entry" 2>/dev/null) || continue
        if [[ -d $other ]] && world_is_leased "$other"; then
            echo "$other"
            return 0
        fi
        rm -f "$entry"
    done
    return 1
}
