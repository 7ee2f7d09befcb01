"""Every message skyward's processes exchange as control: the relay protocol (between a
remote pool's client and its head relay), a node agent's with its worker processes, what
a remote host's scripts report, and the pool daemon's (below).

One frozen class a message, dispatched by type (``match``) at either end, encoded by
``codec.encode_message`` (a msgpack array: the class name, then the fields in order) and
decoded only into these classes, with each field's type checked against its annotation.
A ``Body`` is a user payload as opaque bytes (cloudpickled by the client or a node
agent; the relay never opens it), or such bytes with their out-of-band buffers.

A channel starts with ``handshake`` (both ends prove the pool's secret), then each end
sends ``Hello`` with its ``PROTOCOL``; a mismatch ends the channel with a message naming
both versions.

A relay stream carries a session that may outlive it (``engine.resumable``): the client
then sends ``Resume`` with the session's id (new: nothing received yet) and the relay
answers with its own ``Resume`` (or ``Closed``: it holds no such session). Each end
numbers the other messages it sends, keeps them until the other says with ``Ack`` that it
has them, and after a ``Resume`` on a new stream sends again those the other lacks.

client -> relay                          relay -> client
Call, CallShared, Share, Unshare         Reply, Failed
Forget (a call given up on)              Events, Report
CollectionOp                             CollectionAnswer
Attach (a node joined), Detach           Attached, Lost
Metrics (whether anyone listens)
Observed (what the client saw: the daemon's dashboard)
ReleaseHolds (the client's locks, leases)
Close                                    Closed
Resume, Ack                              Resume, Ack
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

PROTOCOL = 7
"""The relay protocol's version; both ends must speak the same (2: a frame's first byte
may flag a compressed body, ``codec.relay_frame``; 3: ``ReleaseHolds``; 4:
``Attached.joined``, ``Lost``; 5: ``Observed``; 6: ``CollectionOp`` and its answer carry
a ``CollectionCall`` and a ``CollectionResult``; 7: sessions that outlive a stream,
``Resume`` and ``Ack``)."""

Body = bytes | tuple[bytes, tuple[bytes, ...]]
FailureKind = Literal["lost", "crashed", "no_reply", "refused"]
"""Why a call failed: ``transport.NodeLost`` (by the infrastructure, or "crashed": by the
task itself), ``NoReply``, ``Refused``."""


@dataclass(frozen=True, slots=True)
class Hello:
    """The first message each end of a relay stream sends after the handshake."""

    protocol: int


@dataclass(frozen=True, slots=True)
class Resume:
    """After ``Hello``: the session this stream carries (``session``, the client's random
    id) and how many of the other end's numbered messages this end has received (0: a new
    session). Not numbered itself."""

    session: bytes
    received: int


@dataclass(frozen=True, slots=True)
class Ack:
    """This end has received the other's first ``received`` numbered messages: it need
    not keep them for a resume. Not numbered itself."""

    received: int


@dataclass(frozen=True, slots=True)
class Call:
    """Run ``body`` (an encoded ``TaskRequest``) on node ``node``."""

    call_id: int
    node: int
    body: Body
    timeout: float | None


@dataclass(frozen=True, slots=True)
class CallShared:
    """Run the payload stored by ``Share(key)`` on node ``node`` (a broadcast's part)."""

    call_id: int
    node: int
    key: int
    timeout: float | None


@dataclass(frozen=True, slots=True)
class Share:
    """Store ``body`` once for several ``CallShared``."""

    key: int
    body: Body


@dataclass(frozen=True, slots=True)
class Unshare:
    key: int


@dataclass(frozen=True, slots=True)
class Forget:
    """The client gave up on call ``call_id`` (timeout, Ctrl-C): cancel it."""

    call_id: int


@dataclass(frozen=True, slots=True)
class CollectionOp:
    """A collection operation for the head node's agent (an encoded ``CollectionCall``)."""

    call_id: int
    request: bytes


@dataclass(frozen=True, slots=True)
class Attach:
    """Start node ``node``'s agent on the host whose Ray resource is ``serial``;
    ``setup`` is its cloudpickled ``AgentSetup``."""

    call_id: int
    node: int
    serial: int
    setup: bytes


@dataclass(frozen=True, slots=True)
class Detach:
    """Node ``node`` left the pool: fail its calls and kill its agent."""

    node: int
    reason: str


@dataclass(frozen=True, slots=True)
class Metrics:
    """Whether the client listens for metrics now (the agents pause sampling if not)."""

    on: bool


@dataclass(frozen=True, slots=True)
class Observed:
    """What the client of a kept pool observed (its task events, a map's progress, its
    cost), as an encoded event batch, for the pool daemon's dashboard; a relay that has
    no use for it ignores it."""

    batch: bytes


@dataclass(frozen=True, slots=True)
class ReleaseHolds:
    """Free every lock and lease the client holds in the pool's collections; the session
    goes on (the pool daemon's, when the script it served a kept pool to left)."""


@dataclass(frozen=True, slots=True)
class Close:
    """Stop the agents and end the relay."""


@dataclass(frozen=True, slots=True)
class Reply:
    """Call ``call_id``'s answer, as the agent encoded it."""

    call_id: int
    body: Body


@dataclass(frozen=True, slots=True)
class Failed:
    """Call ``call_id`` got no answer from node ``node``."""

    call_id: int
    kind: FailureKind
    node: int
    detail: str


@dataclass(frozen=True, slots=True)
class Events:
    """An event batch of node ``node``, as its agent encoded it."""

    node: int
    batch: bytes


@dataclass(frozen=True, slots=True)
class Report:
    """A problem the relay saw (a node's event stream ended), for the client's log."""

    message: str


@dataclass(frozen=True, slots=True)
class CollectionAnswer:
    """The head node's answer to the client's ``CollectionOp`` ``call_id`` (an encoded
    ``CollectionResult``)."""

    call_id: int
    answer: bytes


@dataclass(frozen=True, slots=True)
class CollectionCall:
    """A collection operation forwarded to a node agent's gateway: the name of a method of
    ``collections.operations.Operations`` and its arguments (a user payload: collection
    names, keys and values are the user's)."""

    operation: str
    arguments: bytes


@dataclass(frozen=True, slots=True)
class CollectionResult:
    """A gateway's answer to a ``CollectionCall``: ``ok`` and the operation's result, or
    not ``ok`` and its error (a user payload either way)."""

    ok: bool
    value: bytes


@dataclass(frozen=True, slots=True)
class Attached:
    """Node ``call_id``'s attach finished: ``error`` is None once its agent answers.
    ``joined``: the node as the relay's side placed it, its pickled ``(NodeHandle,
    InstanceInfo)`` (a kept remote pool's host adds its machines itself); empty when
    the client placed it."""

    call_id: int
    error: str | None
    joined: bytes = b""


@dataclass(frozen=True, slots=True)
class Lost:
    """Node ``node`` was lost to its provider, as the relay's side saw it (a kept remote
    pool's daemon watches its hosts for the script): ``preempted`` when the provider
    took the machine back."""

    node: int
    reason: str
    preempted: bool


@dataclass(frozen=True, slots=True)
class Closed:
    """The relay stopped the agents; nothing follows."""


# A node agent and its worker processes (``Worker(executor="process")``), over the
# child's private pipes (``node.process_executor``, ``node.process_worker``). The
# node's ``InstanceInfo`` and the collections' layout travel pickled, as a task does.


@dataclass(frozen=True, slots=True)
class StartWorker:
    """The first message to a worker process (started with the pool's environment): its
    working directory, the paths it adds, the node's pickled ``InstanceInfo``, the pickled
    collections layout (empty: none) and the pool's plugins."""

    cwd: str
    sys_path: tuple[str, ...]
    info: bytes
    collections: bytes
    plugins: bytes


@dataclass(frozen=True, slots=True)
class RunTask:
    """Run the encoded ``TaskRequest`` ``request``; ``info``: the node's pickled
    ``InstanceInfo`` when it changed since the last task (empty: unchanged)."""

    request: bytes
    info: bytes


@dataclass(frozen=True, slots=True)
class OperationAnswer:
    """The agent's answer to the worker's collection operation ``call_id`` (an encoded
    ``CollectionResult``)."""

    call_id: int
    answer: bytes


@dataclass(frozen=True, slots=True)
class Operation:
    """A collection operation of the running task, for the agent's gateway to run (an
    encoded ``CollectionCall``)."""

    call_id: int
    request: bytes


@dataclass(frozen=True, slots=True)
class TaskOutput:
    """One line the running task printed."""

    stream: Literal["stdout", "stderr"]
    line: str


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """An event the running task published (pickled)."""

    event: bytes


@dataclass(frozen=True, slots=True)
class ItemStarted:
    """The running map task started its item ``index``."""

    index: int


@dataclass(frozen=True, slots=True)
class TaskDone:
    """The task's pickled outcome: ``(True, result)`` or ``(False, TaskFailure)``."""

    outcome: bytes


# What a remote host's scripts (``ssh.watchdog``, ``ssh.head_relay``) report to the client
# on their stdout over SSH, one message a line among whatever else the host prints
# (``codec.marker``, ``codec.read_marker``).


@dataclass(frozen=True, slots=True)
class Watching:
    """The watchdog guards the pool on its host (its client may heartbeat it now)."""


@dataclass(frozen=True, slots=True)
class VolumesMounted:
    """The watchdog mounted the pool's volumes in ``seconds``."""

    seconds: float


@dataclass(frozen=True, slots=True)
class MountFailed:
    """The watchdog could not mount ``bucket`` at ``mount`` (nothing is left mounted)."""

    bucket: str
    mount: str
    cause: str


@dataclass(frozen=True, slots=True)
class UnmountFailed:
    """``bucket`` stays mounted at ``mount`` after the pool stopped."""

    bucket: str
    mount: str
    cause: str


@dataclass(frozen=True, slots=True)
class NotRejoinable:
    """The watchdog has no socket for a successor client (the pool runs on without one)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Stopped:
    """The watchdog stopped the pool on its host."""


@dataclass(frozen=True, slots=True)
class WatchdogGone:
    """No watchdog of the pool listens for a rejoining client."""

    reason: str


@dataclass(frozen=True, slots=True)
class AgentsStarted:
    """The head relay's agents answered, ``seconds`` after it began starting them."""

    seconds: float


@dataclass(frozen=True, slots=True)
class RelayListening:
    """The head relay listens on node 0's loopback ``port``."""

    port: int


@dataclass(frozen=True, slots=True)
class RelayFailed:
    """The head relay could not start, and why."""

    error: str


# The pool daemon of local pools (``skyward.daemon``), over its private Unix socket:
# one request a connection, answered by one message (``Refusal`` when it cannot be served).


@dataclass(frozen=True, slots=True)
class AskStatus:
    pass


@dataclass(frozen=True, slots=True)
class DaemonRunning:
    """The answer to ``AskStatus``: the daemon's pid and its Ray instance's address."""

    pid: int
    address: str


@dataclass(frozen=True, slots=True)
class StopDaemon:
    pass


@dataclass(frozen=True, slots=True)
class Stopping:
    pid: int


@dataclass(frozen=True, slots=True)
class KeepPool:
    """Open a kept pool named ``name`` (``daemon.kept_pools``) and hold it for this
    client: ``request`` is the pickled ``KeptRequest`` (the Spec, Options and this
    client's working directory, import path and environment); ``fingerprint`` is what a
    later client's definition must equal to adopt it."""

    name: str
    fingerprint: str
    keep_alive: float
    request: bytes


@dataclass(frozen=True, slots=True)
class AdoptPool:
    """Hold the kept pool named ``name`` (empty: any whose definition is ``fingerprint``;
    an empty ``fingerprint`` with a name: whatever its definition) for this client;
    ``NotKept`` when there is none, ``Refusal`` when it is defined otherwise or another
    client holds it."""

    name: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class PoolHeld:
    """A kept pool, held for the asking client until its relay session ends: where its
    relay listens, the secret the client proves there, and its nodes (the pickled
    ``InstanceInfo`` tuple, and their handles)."""

    name: str
    pool_id: str
    socket: str
    secret: bytes
    infos: bytes
    nodes: bytes
    """The pickled ``NodeHandle`` tuple."""
    adopted: bool


@dataclass(frozen=True, slots=True)
class NotKept:
    """No kept pool is named so (or, without a name, defined so)."""

    reason: str


@dataclass(frozen=True, slots=True)
class ListPools:
    pass


@dataclass(frozen=True, slots=True)
class KeptPoolRow:
    """One kept pool as ``PoolsKept`` lists it (a record: a field of a message, encoded
    as the array of its own fields)."""

    name: str
    pool_id: str
    nodes: int
    keep_alive: float
    holder: int
    """The pid of the client holding it; 0: none."""
    idle: float
    """Seconds since its last client left; 0 while held."""
    opened: float
    """When it opened, as a Unix time."""
    definition: bytes
    """The pickled Spec and Options it was opened with."""


@dataclass(frozen=True, slots=True)
class PoolsKept:
    """Every pool the daemon keeps."""

    pools: tuple[KeptPoolRow, ...]


@dataclass(frozen=True, slots=True)
class EndPool:
    """Tear the kept pool ``name`` down now (empty: every kept pool), even while held."""

    name: str


@dataclass(frozen=True, slots=True)
class PoolsEnded:
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Refusal:
    """The request was not served, and why."""

    error: str


# The pool daemon and the host process of one of its remote kept pools
# (``daemon.pool_host``), over the private socket pair the daemon made for it
# (``daemon.host_channel``). The daemon reuses ``Metrics`` (whether a page of its
# dashboard follows the pool) and ``Close``
# (tear the pool down); the host answers ``Close`` with ``Closed``, or with ``Refusal``
# naming what could not be confirmed gone, and tees what its relay sessions send the
# script to the daemon as ``Events``, ``Report``, ``Lost`` and ``Observed``.


@dataclass(frozen=True, slots=True)
class OpenRemote:
    """Launch the kept pool ``definition`` (its pickled Spec and Options) with the id
    ``pool_id``, importing from ``sys_path`` first (the client's); answered by ``Members``
    once it runs, or ``Refusal``."""

    definition: bytes
    pool_id: str
    sys_path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TakeOverRemote:
    """Take over the kept pool a dead daemon wrote down: its ``definition`` and its
    pickled ``Handover``; answered as ``OpenRemote``."""

    definition: bytes
    handover: bytes


@dataclass(frozen=True, slots=True)
class ServeSession:
    """Serve the connection that comes with this message (its file descriptor, passed
    along) as relay session ``session`` to the client ``client``, who proves ``secret``;
    ``SessionEnded`` follows when it ends."""

    session: int
    secret: bytes
    client: str


@dataclass(frozen=True, slots=True)
class Recorded:
    """The daemon wrote the pool down (``kept.state``, the registry): should the daemon
    die from now on, a successor takes the pool over, and the host leaves it up. A host
    that loses its daemon before this tears the pool it launched down."""


@dataclass(frozen=True, slots=True)
class Members:
    """The pool's nodes now: the pickled ``NodeHandle`` and ``InstanceInfo`` tuples, and
    the pickled ``Handover`` a successor daemon takes it over with (empty: it cannot be)."""

    nodes: bytes
    infos: bytes
    handover: bytes


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """Relay session ``session`` ended: ``served`` when its client closed it (the pool
    is idle), not when it never proved its secret or its stream broke."""

    session: int
    served: bool


AboutKeptPools = KeepPool | AdoptPool | ListPools | EndPool
"""The daemon's requests that its kept pools serve."""
ToDaemon = AskStatus | StopDaemon | AboutKeptPools
FromDaemon = DaemonRunning | Stopping | Refusal | PoolHeld | NotKept | PoolsKept | PoolsEnded
ToRelay = (
    Hello | Resume | Ack | Call | CallShared | Share | Unshare | Forget | CollectionOp | Attach | Detach | Metrics | Observed
    | ReleaseHolds | Close
)
ToClient = Hello | Resume | Ack | Reply | Failed | Events | Report | CollectionAnswer | Attached | Lost | Closed
ToWorker = StartWorker | RunTask | OperationAnswer
FromWorker = Operation | TaskOutput | TaskEvent | ItemStarted | TaskDone
ToPoolHost = OpenRemote | TakeOverRemote | Recorded | ServeSession | Metrics | Close
FromPoolHost = Members | SessionEnded | Events | Report | Lost | Observed | Closed | Refusal
FromHost = (
    Watching | VolumesMounted | MountFailed | UnmountFailed | NotRejoinable | Stopped | WatchdogGone | AgentsStarted
    | RelayListening | RelayFailed
)
ForwardedCollections = CollectionCall | CollectionResult
"""What a forwarded collection operation and its answer are, inside ``Operation``,
``CollectionOp`` and their answers."""
Message = (
    ToRelay | ToClient | ToDaemon | FromDaemon | ToPoolHost | FromPoolHost | ToWorker | FromWorker | FromHost
    | ForwardedCollections
)
MESSAGES: tuple[type[Message], ...] = get_args(Message)
"""Every message class, each once (what ``codec`` decodes into)."""
RECORDS: tuple[type, ...] = (KeptPoolRow,)
"""The records a message's field may hold (each encoded as the array of its fields)."""
