package streamtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rsocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// echoServer is a gRPC service written out by hand (what protoc would
// generate): a unary Echo and a bidirectional streaming Chat that answers
// every message with its bytes reversed.
type echoServer struct{}

func (echoServer) echo(_ context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	return wrapperspb.Bytes(in.Value), nil
}

func (echoServer) chat(stream grpc.ServerStream) error {
	for {
		in := new(wrapperspb.BytesValue)
		if err := stream.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		out := bytes.Clone(in.Value)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		if err := stream.SendMsg(wrapperspb.Bytes(out)); err != nil {
			return err
		}
	}
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "streamtest.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return srv.(echoServer).echo(ctx, in)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		Handler:       func(srv any, stream grpc.ServerStream) error { return srv.(echoServer).chat(stream) },
		ServerStreams: true,
		ClientStreams: true,
	}},
}

// TestGRPC serves gRPC on a rsocket Listener and calls it through a
// context dialer that dials rsocket: unary calls of several sizes (up to
// 3 MiB, beyond the receive ring) and a bidirectional stream.
func TestGRPC(t *testing.T) {
	l, dial := endpoints(t, rsocket.Options{})
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(8<<20), grpc.MaxSendMsgSize(8<<20))
	srv.RegisterService(&echoDesc, echoServer{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20), grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for _, size := range []int{0, 1, 100, 64 << 10, 3 << 20} {
		in := make([]byte, size)
		for i := range in {
			in[i] = byte(i * 7)
		}
		out := new(wrapperspb.BytesValue)
		if err := cc.Invoke(ctx, "/streamtest.Echo/Echo", wrapperspb.Bytes(in), out); err != nil {
			t.Fatalf("Echo of %d bytes: %v", size, err)
		}
		if !bytes.Equal(out.Value, in) {
			t.Fatalf("Echo of %d bytes came back as %d different bytes", size, len(out.Value))
		}
	}

	stream, err := cc.NewStream(ctx, &echoDesc.Streams[0], "/streamtest.Echo/Chat")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		msg := bytes.Repeat([]byte{byte(i), byte(i + 1)}, 1+i*50)
		if err := stream.SendMsg(wrapperspb.Bytes(msg)); err != nil {
			t.Fatalf("Chat send %d: %v", i, err)
		}
		got := new(wrapperspb.BytesValue)
		if err := stream.RecvMsg(got); err != nil {
			t.Fatalf("Chat receive %d: %v", i, err)
		}
		if len(got.Value) != len(msg) || got.Value[0] != msg[len(msg)-1] || got.Value[len(msg)-1] != msg[0] {
			t.Fatalf("Chat message %d came back wrong", i)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := stream.RecvMsg(new(wrapperspb.BytesValue)); err != io.EOF {
		t.Fatalf("Chat end: %v, want io.EOF", err)
	}
}
