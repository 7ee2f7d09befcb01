"""Every message skyward's processes exchange as control: the relay protocol (between a
remote pool's client and its head relay), a node agent's with its worker processes, what
a remote host's scripts report, and the pool daemon's (below).

One frozen class a message (a ``msgspec.Struct``: defining one costs microseconds where a
frozen dataclass costs an ``exec`` per generated method, and a pool's first open
defines all of them), dispatched by type (``match``) at either end, encoded by
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
ShareUploaded (a Share whose body came
over the upload lane)
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

from typing import Literal, get_args

from msgspec import Struct

PROTOCOL = 8
"""The relay protocol's version; both ends must speak the same (2: a frame's first byte
may flag a compressed body, ``codec.relay_frame``; 3: ``ReleaseHolds``; 4:
``Attached.joined``, ``Lost``; 5: ``Observed``; 6: ``CollectionOp`` and its answer carry
a ``CollectionCall`` and a ``CollectionResult``; 7: sessions that outlive a stream,
``Resume`` and ``Ack``; 8: ``ShareUploaded``)."""

Body = bytes | tuple[bytes, tuple[bytes, ...]]

FailureKind = Literal["lost", "crashed", "no_reply", "refused"]
"""Why a call failed: ``transport.NodeLost`` (by the infrastructure, or "crashed": by the
task itself), ``NoReply``, ``Refused``."""


class _Record(Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """An immutable record that travels as the array of its fields, in order; decoding
    refuses one with a field more."""


class _Message(_Record, frozen=True, tag=True):
    """A message: a record whose array starts with its class name."""


class Hello(_Message, frozen=True):
    """The first message each end of a relay stream sends after the handshake."""

    protocol: int


class Resume(_Message, frozen=True):
    """After ``Hello``: the session this stream carries (``session``, the client's random
    id) and how many of the other end's numbered messages this end has received (0: a new
    session). Not numbered itself."""

    session: bytes
    received: int


class Ack(_Message, frozen=True):
    """This end has received the other's first ``received`` numbered messages: it need
    not keep them for a resume. Not numbered itself."""

    received: int


class Call(_Message, frozen=True):
    """Run ``body`` (an encoded ``TaskRequest``) on node ``node``."""

    call_id: int
    node: int
    body: Body
    timeout: float | None


class CallShared(_Message, frozen=True):
    """Run the payload stored by ``Share(key)`` on node ``node`` (a broadcast's part)."""

    call_id: int
    node: int
    key: int
    timeout: float | None


class Share(_Message, frozen=True):
    """Store ``body`` once for several ``CallShared``."""

    key: int
    body: Body


class ShareUploaded(_Message, frozen=True):
    """Store, as ``Share(key)`` would, the payload the relay holds under ``ticket``: the
    client uploaded it over the upload lane (``engine.transports.upload_lane``)."""

    key: int
    ticket: bytes


class Unshare(_Message, frozen=True):
    key: int


class Forget(_Message, frozen=True):
    """The client gave up on call ``call_id`` (timeout, Ctrl-C): cancel it."""

    call_id: int


class CollectionOp(_Message, frozen=True):
    """A collection operation for the head node's agent (an encoded ``CollectionCall``)."""

    call_id: int
    request: bytes


class Attach(_Message, frozen=True):
    """Start node ``node``'s agent on the host whose Ray resource is ``serial``;
    ``setup`` is its cloudpickled ``AgentSetup``."""

    call_id: int
    node: int
    serial: int
    setup: bytes


class Detach(_Message, frozen=True):
    """Node ``node`` left the pool: fail its calls and kill its agent."""

    node: int
    reason: str


class Metrics(_Message, frozen=True):
    """Whether the client listens for metrics now (the agents pause sampling if not)."""

    on: bool


class Observed(_Message, frozen=True):
    """What the client of a kept pool observed (its task events, a map's progress, its
    cost), as an encoded event batch, for the pool daemon's dashboard; a relay that has
    no use for it ignores it."""

    batch: bytes


class ReleaseHolds(_Message, frozen=True):
    """Free every lock and lease the client holds in the pool's collections; the session
    goes on (the pool daemon's, when the script it served a kept pool to left)."""


class Close(_Message, frozen=True):
    """Stop the agents and end the relay."""


class Reply(_Message, frozen=True):
    """Call ``call_id``'s answer, as the agent encoded it."""

    call_id: int
    body: Body


class Failed(_Message, frozen=True):
    """Call ``call_id`` got no answer from node ``node``."""

    call_id: int
    kind: FailureKind
    node: int
    detail: str


class Events(_Message, frozen=True):
    """An event batch of node ``node``, as its agent encoded it."""

    node: int
    batch: bytes


class Report(_Message, frozen=True):
    """A problem the relay saw (a node's event stream ended), for the client's log."""

    message: str


class CollectionAnswer(_Message, frozen=True):
    """The head node's answer to the client's ``CollectionOp`` ``call_id`` (an encoded
    ``CollectionResult``)."""

    call_id: int
    answer: bytes


class CollectionCall(_Message, frozen=True):
    """A collection operation forwarded to a node agent's gateway: the name of a method of
    ``collections.operations.Operations`` and its arguments (a user payload: collection
    names, keys and values are the user's)."""

    operation: str
    arguments: bytes


class CollectionResult(_Message, frozen=True):
    """A gateway's answer to a ``CollectionCall``: ``ok`` and the operation's result, or
    not ``ok`` and its error (a user payload either way)."""

    ok: bool
    value: bytes


class Attached(_Message, frozen=True):
    """Node ``call_id``'s attach finished: ``error`` is None once its agent answers.
    ``joined``: the node as the relay's side placed it, its pickled ``(NodeHandle,
    InstanceInfo)`` (a kept remote pool's host adds its machines itself); empty when
    the client placed it."""

    call_id: int
    error: str | None
    joined: bytes = b""


class Lost(_Message, frozen=True):
    """Node ``node`` was lost to its provider, as the relay's side saw it (a kept remote
    pool's daemon watches its hosts for the script): ``preempted`` when the provider
    took the machine back."""

    node: int
    reason: str
    preempted: bool


class Closed(_Message, frozen=True):
    """The relay stopped the agents; nothing follows."""


# A node agent and its worker processes (``Worker(executor="process")``), over the
# child's private pipes (``node.process_executor``, ``node.process_worker``). The
# node's ``InstanceInfo`` and the collections' layout travel pickled, as a task does.


class StartWorker(_Message, frozen=True):
    """The first message to a worker process (started with the pool's environment): its
    working directory, the paths it adds, the node's pickled ``InstanceInfo``, the pickled
    collections layout (empty: none) and the pool's plugins."""

    cwd: str
    sys_path: tuple[str, ...]
    info: bytes
    collections: bytes
    plugins: bytes


class RunTask(_Message, frozen=True):
    """Run the encoded ``TaskRequest`` ``request``; ``info``: the node's pickled
    ``InstanceInfo`` when it changed since the last task (empty: unchanged)."""

    request: bytes
    info: bytes


class OperationAnswer(_Message, frozen=True):
    """The agent's answer to the worker's collection operation ``call_id`` (an encoded
    ``CollectionResult``)."""

    call_id: int
    answer: bytes


class Operation(_Message, frozen=True):
    """A collection operation of the running task, for the agent's gateway to run (an
    encoded ``CollectionCall``)."""

    call_id: int
    request: bytes


class TaskOutput(_Message, frozen=True):
    """One line the running task printed."""

    stream: Literal["stdout", "stderr"]
    line: str


class TaskEvent(_Message, frozen=True):
    """An event the running task published (pickled)."""

    event: bytes


class TaskDone(_Message, frozen=True):
    """The task's pickled outcome: ``(True, result)`` or ``(False, TaskFailure)``."""

    outcome: bytes


# What a remote host's scripts (``ssh.watchdog``, ``ssh.head_relay``) report to the client
# on their stdout over SSH, one message a line among whatever else the host prints
# (``codec.marker``, ``codec.read_marker``).


class Watching(_Message, frozen=True):
    """The watchdog guards the pool on its host (its client may heartbeat it now)."""


class VolumesMounted(_Message, frozen=True):
    """The watchdog mounted the pool's volumes in ``seconds``."""

    seconds: float


class MountFailed(_Message, frozen=True):
    """The watchdog could not mount ``bucket`` at ``mount`` (nothing is left mounted)."""

    bucket: str
    mount: str
    cause: str


class UnmountFailed(_Message, frozen=True):
    """``bucket`` stays mounted at ``mount`` after the pool stopped."""

    bucket: str
    mount: str
    cause: str


class NotRejoinable(_Message, frozen=True):
    """The watchdog has no socket for a successor client (the pool runs on without one)."""

    reason: str


class Stopped(_Message, frozen=True):
    """The watchdog stopped the pool on its host."""


class WatchdogGone(_Message, frozen=True):
    """No watchdog of the pool listens for a rejoining client."""

    reason: str


class AgentsStarted(_Message, frozen=True):
    """The head relay's agents answered, ``seconds`` after it began starting them."""

    seconds: float


class RelayListening(_Message, frozen=True):
    """The head relay listens on node 0's loopback ``port``."""

    port: int


class UploadListening(_Message, frozen=True):
    """The head relay's upload lane listens on ``port`` of node 0's address on the pool's
    network (said before ``RelayListening``; never, where it could not listen)."""

    port: int


class RelayFailed(_Message, frozen=True):
    """The head relay could not start, and why."""

    error: str


# The pool daemon of local pools (``skyward.daemon``), over its private Unix socket:
# one request a connection, answered by one message (``Refusal`` when it cannot be served).


class AskStatus(_Message, frozen=True):
    pass


class DaemonRunning(_Message, frozen=True):
    """The answer to ``AskStatus``: the daemon's pid and its Ray instance's address."""

    pid: int
    address: str


class StopDaemon(_Message, frozen=True):
    pass


class Stopping(_Message, frozen=True):
    pid: int


class KeepPool(_Message, frozen=True):
    """Open a kept pool named ``name`` (``daemon.kept_pools``) and hold it for this
    client: ``request`` is the pickled ``KeptRequest`` (the Spec, Options and this
    client's working directory, import path and environment); ``fingerprint`` is what a
    later client's definition must equal to adopt it."""

    name: str
    fingerprint: str
    keep_alive: float
    request: bytes


class AdoptPool(_Message, frozen=True):
    """Hold the kept pool named ``name`` (empty: any whose definition is ``fingerprint``;
    an empty ``fingerprint`` with a name: whatever its definition) for this client;
    ``NotKept`` when there is none, ``Refusal`` when it is defined otherwise or another
    client holds it."""

    name: str
    fingerprint: str


class PoolHeld(_Message, frozen=True):
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


class NotKept(_Message, frozen=True):
    """No kept pool is named so (or, without a name, defined so)."""

    reason: str


class ListPools(_Message, frozen=True):
    pass


class KeptPoolRow(_Record, frozen=True):
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


class PoolsKept(_Message, frozen=True):
    """Every pool the daemon keeps."""

    pools: tuple[KeptPoolRow, ...]


class EndPool(_Message, frozen=True):
    """Tear the kept pool ``name`` down now (empty: every kept pool), even while held."""

    name: str


class PoolsEnded(_Message, frozen=True):
    names: tuple[str, ...]


class Refusal(_Message, frozen=True):
    """The request was not served, and why."""

    error: str


# The pool daemon and the host process of one of its remote kept pools
# (``daemon.pool_host``), over the private socket pair the daemon made for it
# (``daemon.host_channel``). The daemon reuses ``Metrics`` (whether a page of its
# dashboard follows the pool) and ``Close``
# (tear the pool down); the host answers ``Close`` with ``Closed``, or with ``Refusal``
# naming what could not be confirmed gone, and tees what its relay sessions send the
# script to the daemon as ``Events``, ``Report``, ``Lost`` and ``Observed``.


class OpenRemote(_Message, frozen=True):
    """Launch the kept pool ``definition`` (its pickled Spec and Options) with the id
    ``pool_id``, importing from ``sys_path`` first (the client's); answered by ``Members``
    once it runs, or ``Refusal``."""

    definition: bytes
    pool_id: str
    sys_path: tuple[str, ...]


class TakeOverRemote(_Message, frozen=True):
    """Take over the kept pool a dead daemon wrote down: its ``definition`` and its
    pickled ``Handover``; answered as ``OpenRemote``."""

    definition: bytes
    handover: bytes


class ServeSession(_Message, frozen=True):
    """Serve the connection that comes with this message (its file descriptor, passed
    along) as relay session ``session`` to the client ``client``, who proves ``secret``;
    ``SessionEnded`` follows when it ends."""

    session: int
    secret: bytes
    client: str


class Recorded(_Message, frozen=True):
    """The daemon wrote the pool down (``kept.state``, the registry): should the daemon
    die from now on, a successor takes the pool over, and the host leaves it up. A host
    that loses its daemon before this tears the pool it launched down."""


class Members(_Message, frozen=True):
    """The pool's nodes now: the pickled ``NodeHandle`` and ``InstanceInfo`` tuples, and
    the pickled ``Handover`` a successor daemon takes it over with (empty: it cannot be)."""

    nodes: bytes
    infos: bytes
    handover: bytes


class SessionEnded(_Message, frozen=True):
    """Relay session ``session`` ended: ``served`` when its client closed it (the pool
    is idle), not when it never proved its secret or its stream broke."""

    session: int
    served: bool


AboutKeptPools = KeepPool | AdoptPool | ListPools | EndPool
"""The daemon's requests that its kept pools serve."""
ToDaemon = AskStatus | StopDaemon | AboutKeptPools
FromDaemon = DaemonRunning | Stopping | Refusal | PoolHeld | NotKept | PoolsKept | PoolsEnded
ToRelay = (
    Hello | Resume | Ack | Call | CallShared | Share | ShareUploaded | Unshare | Forget | CollectionOp | Attach | Detach
    | Metrics | Observed | ReleaseHolds | Close
)
ToClient = Hello | Resume | Ack | Reply | Failed | Events | Report | CollectionAnswer | Attached | Lost | Closed
ToWorker = StartWorker | RunTask | OperationAnswer
FromWorker = Operation | TaskOutput | TaskEvent | TaskDone
ToPoolHost = OpenRemote | TakeOverRemote | Recorded | ServeSession | Metrics | Close
FromPoolHost = Members | SessionEnded | Events | Report | Lost | Observed | Closed | Refusal
FromHost = (
    Watching | VolumesMounted | MountFailed | UnmountFailed | NotRejoinable | Stopped | WatchdogGone | AgentsStarted
    | UploadListening | RelayListening | RelayFailed
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
