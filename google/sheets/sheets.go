// Package sheets is the google_sheets tool group: the calling person's
// Google Sheets, every sheet of them, through the Sheets API.
package sheets

import (
	"context"
	"fmt"
	"strings"

	gsheets "google.golang.org/api/sheets/v4"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_sheets"

// Service is the Sheets API as the group asks google.Client for it.
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "sheets/", Scopes: []string{gsheets.SpreadsheetsScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff retries temporary Google errors.
	Backoff backoff.Policy
	// MaxCells caps the cells sheets_read returns; default 5,000.
	MaxCells int
}

// New returns the google_sheets group, its tools and scopes, acting as
// the calling person through c.
func New(c google.Client, o Options) google.Group {
	if o.MaxCells <= 0 {
		o.MaxCells = 5000
	}
	g := &group{opts: o, api: google.API[gsheets.Service]{Client: c, Service: Service(), New: gsheets.NewService, Backoff: o.Backoff}}
	return google.Group{Examples: examples,
		Group: tools.Group{Name: GroupName, DisplayName: "Google Sheets",
			Description: "The person's Google Sheets: create, list the sheets, read, write, append and clear ranges, add, rename and delete sheets."},
		Tools: []tools.Tool{
			tools.New(tools.Definition{Name: "sheets_create", Description: "Create a spreadsheet, optionally with named sheets."}, g.create),
			tools.New(tools.Definition{Name: "sheets_info", Description: "A spreadsheet's title and every sheet with its id and size.", ReadOnly: true, Untrusted: true}, g.info),
			tools.New(tools.Definition{Name: "sheets_read", Description: "Read a range in A1 notation, on any sheet ('Sheet2'!A1:D20; a sheet name alone reads it all).", ReadOnly: true, Untrusted: true}, g.read),
			tools.New(tools.Definition{Name: "sheets_write", Description: "Write rows to a range, or append them after a table's last row; values are read as typed in the UI (formulas, dates)."}, g.write),
			tools.New(tools.Definition{Name: "sheets_clear", Description: "Clear the values of a range.", Effect: tools.EffectDestructive,
				Summarize: tools.By(func(_ context.Context, in rangeIn) string {
					return fmt.Sprintf("Clear %s in the spreadsheet %s", in.Range, in.SpreadsheetID)
				})}, g.clear),
			tools.New(tools.Definition{Name: "sheets_tabs", Description: "Add, rename or delete a sheet of a spreadsheet.",
				EffectFor: tools.By(func(_ context.Context, in tabsIn) tools.Effect {
					if in.Action == "delete" {
						return tools.EffectDestructive
					}
					return tools.EffectMutate
				}),
				Summarize: tools.By(func(_ context.Context, in tabsIn) string {
					return fmt.Sprintf("Delete the sheet %d of the spreadsheet %s, with everything on it", in.SheetID, in.SpreadsheetID)
				})}, g.tabs),
		},
		Scopes: Service().Scopes,
	}
}

type group struct {
	opts Options
	api  google.API[gsheets.Service]
}

func what(id string) string { return fmt.Sprintf("the spreadsheet '%s'", id) }

func link(id string) string { return "https://docs.google.com/spreadsheets/d/" + id + "/edit" }

// sheet is one sheet as tools return it.
type sheet struct {
	ID      int64  `json:"sheet_id"`
	Title   string `json:"title"`
	Rows    int64  `json:"rows,omitempty"`
	Columns int64  `json:"columns,omitempty"`
}

func toSheets(ss []*gsheets.Sheet) []sheet {
	out := []sheet{}
	for _, s := range ss {
		if s.Properties == nil {
			continue
		}
		sh := sheet{ID: s.Properties.SheetId, Title: s.Properties.Title}
		if gp := s.Properties.GridProperties; gp != nil {
			sh.Rows, sh.Columns = gp.RowCount, gp.ColumnCount
		}
		out = append(out, sh)
	}
	return out
}

type createIn struct {
	Title  string   `json:"title"`
	Sheets []string `json:"sheets,omitempty" desc:"sheet names; default one 'Sheet1'"`
}

func (g *group) create(ctx context.Context, in createIn) (any, error) {
	if err := google.Required("title", in.Title); err != nil {
		return nil, err
	}
	sp := &gsheets.Spreadsheet{Properties: &gsheets.SpreadsheetProperties{Title: strings.TrimSpace(in.Title)}}
	for _, name := range in.Sheets {
		sp.Sheets = append(sp.Sheets, &gsheets.Sheet{Properties: &gsheets.SheetProperties{Title: name}})
	}
	res, err := google.DoOnce(ctx, g.api, "the new spreadsheet", func(s *gsheets.Service) (*gsheets.Spreadsheet, error) {
		return s.Spreadsheets.Create(sp).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "created", "spreadsheet_id": res.SpreadsheetId, "link": link(res.SpreadsheetId), "sheets": toSheets(res.Sheets)}, nil
}

type idIn struct {
	SpreadsheetID string `json:"spreadsheet_id"`
}

func (g *group) info(ctx context.Context, in idIn) (any, error) {
	if err := google.Required("spreadsheet_id", in.SpreadsheetID); err != nil {
		return nil, err
	}
	res, err := google.Do(ctx, g.api, what(in.SpreadsheetID), func(s *gsheets.Service) (*gsheets.Spreadsheet, error) {
		return s.Spreadsheets.Get(in.SpreadsheetID).Fields("spreadsheetId,properties(title,locale,timeZone),sheets(properties(sheetId,title,gridProperties(rowCount,columnCount)))").Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	out := map[string]any{"spreadsheet_id": res.SpreadsheetId, "link": link(res.SpreadsheetId), "sheets": toSheets(res.Sheets)}
	if res.Properties != nil {
		out["title"], out["time_zone"] = res.Properties.Title, res.Properties.TimeZone
	}
	return out, nil
}

type rangeIn struct {
	SpreadsheetID string `json:"spreadsheet_id"`
	Range         string `json:"range" desc:"A1 notation, e.g. 'Budget 2026'!A1:F50 or Sheet1"`
}

func (g *group) read(ctx context.Context, in rangeIn) (any, error) {
	if err := checkRange(in); err != nil {
		return nil, err
	}
	res, err := google.Do(ctx, g.api, what(in.SpreadsheetID), func(s *gsheets.Service) (*gsheets.ValueRange, error) {
		return s.Spreadsheets.Values.Get(in.SpreadsheetID, in.Range).ValueRenderOption("FORMATTED_VALUE").Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	rows, cells, cut := [][]any{}, 0, false
	for _, r := range res.Values {
		if cells+len(r) > g.opts.MaxCells {
			cut = true
			break
		}
		cells += len(r)
		rows = append(rows, r)
	}
	out := map[string]any{"range": res.Range, "rows": rows}
	if cut {
		out["note"] = fmt.Sprintf("Only the first %d rows (%d cells) are here; read a smaller range for the rest.", len(rows), cells)
	}
	return out, nil
}

func checkRange(in rangeIn) error {
	if err := google.Required("spreadsheet_id", in.SpreadsheetID); err != nil {
		return err
	}
	return google.Required("range", in.Range)
}

type writeIn struct {
	SpreadsheetID string  `json:"spreadsheet_id"`
	Range         string  `json:"range" desc:"where to write, e.g. Sheet1!A2; for append, the table, e.g. Sheet1!A:D"`
	Values        [][]any `json:"values" desc:"rows of cell values"`
	Append        bool    `json:"append,omitempty" desc:"add the rows after the table's last row"`
}

func (g *group) write(ctx context.Context, in writeIn) (any, error) {
	if err := checkRange(rangeIn{in.SpreadsheetID, in.Range}); err != nil {
		return nil, err
	}
	if len(in.Values) == 0 {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "values needs at least one row."}
	}
	vr := &gsheets.ValueRange{Values: in.Values}
	if in.Append {
		res, err := google.Do(ctx, g.api, what(in.SpreadsheetID), func(s *gsheets.Service) (*gsheets.AppendValuesResponse, error) {
			return s.Spreadsheets.Values.Append(in.SpreadsheetID, in.Range, vr).ValueInputOption("USER_ENTERED").
				InsertDataOption("INSERT_ROWS").Context(ctx).Do()
		})
		if err != nil {
			return nil, err
		}
		out := map[string]any{"status": "appended"}
		if u := res.Updates; u != nil {
			out["range"], out["rows"], out["cells"] = u.UpdatedRange, u.UpdatedRows, u.UpdatedCells
		}
		return out, nil
	}
	res, err := google.Do(ctx, g.api, what(in.SpreadsheetID), func(s *gsheets.Service) (*gsheets.UpdateValuesResponse, error) {
		return s.Spreadsheets.Values.Update(in.SpreadsheetID, in.Range, vr).ValueInputOption("USER_ENTERED").Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "written", "range": res.UpdatedRange, "rows": res.UpdatedRows, "cells": res.UpdatedCells}, nil
}

func (g *group) clear(ctx context.Context, in rangeIn) (any, error) {
	if err := checkRange(in); err != nil {
		return nil, err
	}
	res, err := google.Do(ctx, g.api, what(in.SpreadsheetID), func(s *gsheets.Service) (*gsheets.ClearValuesResponse, error) {
		return s.Spreadsheets.Values.Clear(in.SpreadsheetID, in.Range, &gsheets.ClearValuesRequest{}).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "cleared", "range": res.ClearedRange}, nil
}

type tabsIn struct {
	SpreadsheetID string `json:"spreadsheet_id"`
	Action        string `json:"action" enum:"add,rename,delete"`
	Title         string `json:"title,omitempty" desc:"for add and rename: the (new) name"`
	SheetID       int64  `json:"sheet_id,omitempty" desc:"for rename and delete, from sheets_info"`
}

func (g *group) tabs(ctx context.Context, in tabsIn) (any, error) {
	if err := google.Required("spreadsheet_id", in.SpreadsheetID); err != nil {
		return nil, err
	}
	var req *gsheets.Request
	switch in.Action {
	case "add":
		if err := google.Required("title", in.Title); err != nil {
			return nil, err
		}
		req = &gsheets.Request{AddSheet: &gsheets.AddSheetRequest{Properties: &gsheets.SheetProperties{Title: in.Title}}}
	case "rename":
		if err := google.Required("title", in.Title); err != nil {
			return nil, err
		}
		req = &gsheets.Request{UpdateSheetProperties: &gsheets.UpdateSheetPropertiesRequest{Fields: "title",
			Properties: &gsheets.SheetProperties{SheetId: in.SheetID, Title: in.Title, ForceSendFields: []string{"SheetId"}}}}
	case "delete":
		req = &gsheets.Request{DeleteSheet: &gsheets.DeleteSheetRequest{SheetId: in.SheetID, ForceSendFields: []string{"SheetId"}}}
	default:
		return nil, tools.UnknownAction("sheets_tabs", in.Action, "add", "rename", "delete")
	}
	res, err := google.Do(ctx, g.api, what(in.SpreadsheetID), func(s *gsheets.Service) (*gsheets.BatchUpdateSpreadsheetResponse, error) {
		return s.Spreadsheets.BatchUpdate(in.SpreadsheetID, &gsheets.BatchUpdateSpreadsheetRequest{Requests: []*gsheets.Request{req}}).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	out := map[string]any{"status": map[string]string{"add": "added", "rename": "renamed", "delete": "deleted"}[in.Action]}
	if len(res.Replies) > 0 && res.Replies[0].AddSheet != nil && res.Replies[0].AddSheet.Properties != nil {
		out["sheet_id"] = res.Replies[0].AddSheet.Properties.SheetId
	}
	return out, nil
}
