/**
 * The libc system calls of our netlink sockets, bound through koffi, and the socket-level constants they take.
 * Together with netlink/socket.ts (nf_tables) and netlink/ct-socket.ts (ctnetlink), which call it, this is the
 * only I/O in netlink/.
 *
 * Constants: linux/socket.h and asm-generic/socket.h (AF_NETLINK 16, SOL_SOCKET 1, SO_SNDBUF 7, SO_RCVBUF 8,
 * SO_SNDBUFFORCE 32, SO_RCVBUFFORCE 33), linux/netlink.h (NETLINK_NETFILTER 12, SOL_NETLINK 270,
 * NETLINK_ADD_MEMBERSHIP 1, NETLINK_DROP_MEMBERSHIP 2, NETLINK_NO_ENOBUFS 5, NETLINK_CAP_ACK 10, NETLINK_EXT_ACK 11),
 * bits/socket.h (SOCK_RAW 3, SOCK_CLOEXEC 0o2000000, MSG_DONTWAIT 0x40), poll.h (POLLIN 1),
 * asm-generic/errno-base.h and errno.h (EINTR 4, ENOENT 2, EAGAIN 11, ENOBUFS 105, ETIMEDOUT 110).
 */
import koffi from 'koffi';

export const AF_NETLINK = 16;
export const SOCK_RAW = 3;
export const SOCK_CLOEXEC = 0o2000000;
export const NETLINK_NETFILTER = 12;
export const SOL_SOCKET = 1;
export const SO_SNDBUF = 7;
export const SO_RCVBUF = 8;
export const SO_SNDBUFFORCE = 32;
export const SO_RCVBUFFORCE = 33;
export const SOL_NETLINK = 270;
export const NETLINK_ADD_MEMBERSHIP = 1;
export const NETLINK_DROP_MEMBERSHIP = 2;
export const NETLINK_NO_ENOBUFS = 5;
export const NETLINK_CAP_ACK = 10;
export const NETLINK_EXT_ACK = 11;
export const MSG_DONTWAIT = 0x40;
export const POLLIN = 1;
export const ENOENT = 2;
export const EINTR = 4;
export const EAGAIN = 11;
export const ENOBUFS = 105;
export const ETIMEDOUT = 110;

/**
 * The libc functions we call, as koffi binds them: return values are the C ones (-1 on failure, then `errno()`
 * gives the positive errno). Buffers are passed by pointer. `send.async` runs send() on koffi's worker thread.
 */
export interface Libc {
  socket(domain: number, type: number, protocol: number): number;
  bind(fd: number, addr: Buffer, len: number): number;
  setsockopt(fd: number, level: number, name: number, value: Buffer, len: number): number;
  getsockopt(fd: number, level: number, name: number, value: Buffer, len: Buffer): number;
  getsockname(fd: number, addr: Buffer, len: Buffer): number;
  send: ((fd: number, buf: Buffer, len: number, flags: number) => number) & {
    async(fd: number, buf: Buffer, len: number, flags: number, cb: (err: unknown, res: number) => void): void;
  };
  recv(fd: number, buf: Buffer, len: number, flags: number): number;
  poll(fds: Buffer, n: number, timeoutMs: number): number;
  close(fd: number): number;
  errno(): number;
}

/**
 * Binds the libc functions (koffi caches the loaded library, so this is cheap after the first call).
 * @throws Error when libc.so.6 cannot be loaded (not glibc).
 */
export function loadLibc(): Libc {
  const lib = koffi.load('libc.so.6');
  return {
    socket: lib.func('int socket(int, int, int)'),
    bind: lib.func('int bind(int, void *, uint32_t)'),
    setsockopt: lib.func('int setsockopt(int, int, int, void *, uint32_t)'),
    getsockopt: lib.func('int getsockopt(int, int, int, _Out_ void *, _Inout_ void *)'),
    getsockname: lib.func('int getsockname(int, _Out_ void *, _Inout_ void *)'),
    send: lib.func('intptr_t send(int, void *, size_t, int)'),
    recv: lib.func('intptr_t recv(int, _Out_ void *, size_t, int)'),
    poll: lib.func('int poll(void *, uint64_t, int)'),
    close: lib.func('int close(int)'),
    errno: () => koffi.errno(),
  } as Libc;
}
