"""Protobuf wire-format pieces shared by mlsim's Chakra trace writers (tools/chakra_example.py,
tools/peers/megatron_chakra.py): Chakra files are a varint-length-delimited GlobalMetadata, then
one varint-length-delimited Node per node (Chakra's encodeMessage)."""


def varint(n):
    """Base-128 varint of a non-negative integer (protobuf's encoding)."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def delimited(message):
    """One length-delimited message, as Chakra's encodeMessage writes it."""
    return varint(len(message)) + message
