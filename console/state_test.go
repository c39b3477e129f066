package console

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// queryMethod is the QueryMethod of rpc name of the example ledger's
// queries service, as reflection describes it.
func queryMethod(t *testing.T, name string) *QueryMethod {
	t.Helper()
	var d, err = protoregistry.GlobalFiles.FindDescriptorByName("gazconsumer.example.bank.v1.LedgerQueries." + protoreflect.FullName(name))
	if err != nil {
		t.Fatal(err)
	}
	var md = d.(protoreflect.MethodDescriptor)
	return &QueryMethod{Service: "gazconsumer.example.bank.v1.LedgerQueries", Name: name, desc: md,
		read: proto.GetExtension(md.Options(), gcv1.E_Read).(*gcv1.Read)}
}

// A form has an input of each field of the request, but the page token;
// its values are typed by the fields' kinds, and a value not of its kind is
// an error naming the field.
func TestConsoleQueryForm(t *testing.T) {
	var m = queryMethod(t, "ListBalances")
	var fields = m.Fields(url.Values{"customerId": {"customer-0001"}, "limit": {"2"}})
	var got []string
	for _, f := range fields {
		got = append(got, f.Path+":"+f.Kind+"="+f.Value)
	}
	if want := []string{"customerId:string=customer-0001", "limit:int32=2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("fields %v, want %v", got, want)
	}

	var req = dynamicpb.NewMessage(m.desc.Input())
	if err := formRequest(m, url.Values{"customerId": {"customer-0001"}, "limit": {"2"}, "page_token": {"tok"}}, req); err != nil {
		t.Fatal(err)
	}
	var typed = new(bankv1.ListBalancesRequest)
	if b, err := proto.Marshal(req); err != nil || proto.Unmarshal(b, typed) != nil {
		t.Fatal(err)
	}
	if typed.CustomerId != "customer-0001" || typed.Limit != 2 || typed.PageToken != "tok" {
		t.Fatalf("request %v", typed)
	}
	if err := formRequest(m, url.Values{"limit": {"many"}}, dynamicpb.NewMessage(m.desc.Input())); err == nil || !strings.Contains(err.Error(), `limit: "many" is not an integer`) {
		t.Fatalf("a limit not an integer: %v", err)
	}
}

// A SCAN's rows are those of its response's repeated field, with the next
// page's token; a GET's row is its response.
func TestConsoleQueryResult(t *testing.T) {
	var scan = queryMethod(t, "ListBalances")
	var resp = &bankv1.ListBalancesResponse{NextPageToken: "next", Balances: []*bankv1.Balance{
		{CustomerId: "c1", AccountId: "a1", BalanceCents: -250, Version: 3},
		{CustomerId: "c1", AccountId: "a2", BalanceCents: 100, Version: 1},
	}}
	var res, err = result(scan, dynamicOf(t, resp, scan.desc.Output()))
	if err != nil {
		t.Fatal(err)
	}
	var want = &QueryResult{
		Columns:       []string{"customer_id", "account_id", "balance_cents", "version"},
		Rows:          [][]string{{"c1", "a1", "-250", "3"}, {"c1", "a2", "100", "1"}},
		NextPageToken: "next",
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("result %+v, want %+v", res, want)
	}

	var getM = queryMethod(t, "GetBalance")
	if getM.Scan() {
		t.Fatal("GetBalance is a SCAN")
	}
	res, err = result(getM, dynamicOf(t, resp.Balances[0], getM.desc.Output()))
	if err != nil {
		t.Fatal(err)
	} else if !reflect.DeepEqual(res.Rows, [][]string{{"c1", "a1", "-250", "3"}}) {
		t.Fatalf("GET result %+v", res)
	}
}

// dynamicOf is msg as a dynamic message of md.
func dynamicOf(t *testing.T, msg proto.Message, md protoreflect.MessageDescriptor) *dynamicpb.Message {
	t.Helper()
	var b, err = proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var out = dynamicpb.NewMessage(md)
	if err = proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}
